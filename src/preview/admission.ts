/**
 * Whether the shipped admission policy guards what only admission can check of a
 * PullRequestPreview (config/admission; docs/previews.md, "Admission"; case B10): Secret
 * envRefs and `spec.webhook.reconcileBaseOnPush`.
 *
 * Only admission knows who writes a PullRequestPreview, so only the ValidatingAdmissionPolicy can
 * check that this user may `get` each Secret named by `stackOverrides.spec.envRefs`, and may
 * `patch` the base Stack it asks pushes to run. The controller (which may read every Secret and
 * patch every Stack) therefore honours these only while that policy is in force over every
 * PullRequestPreview: the binding denies (`validationActions` has Deny) and has no
 * `matchResources` or `paramRef`, the policy fails closed (`failurePolicy: Fail`), and neither was
 * changed since it was created (`metadata.generation` 1: an edit may have let objects through
 * before it was undone) — and only for PullRequestPreviews created after both existed: an object
 * created before was never checked. Everything else is refused with the reason, which the
 * reconciler puts in the Ready condition.
 *
 * The same rule serves the other policies of config/admission, by `name` and `kind`: DriftDetection
 * remediation (src/drift/controller.ts) and Alerts selecting other namespaces
 * (`ALERT_SOURCES_POLICY_NAME` of src/api/v1alpha1.ts, src/reconcile/alert.ts).
 */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import { errorMessage, errorStatusCode, kubeRequest, objectPath } from '../kube/client.ts';
import type { SecretEnvRefsVerdict } from './stack.ts';

/** Name of the shipped ValidatingAdmissionPolicy and of its binding (config/admission). */
export const ADMISSION_POLICY_NAME = 'pko-notification-controller-preview-overrides';
/** How long one look-up of the policy and its binding is reused, ms. */
export const ADMISSION_CHECK_TTL_MS = 60_000;
/**
 * Margin after the policy and binding exist before a new PullRequestPreview counts as checked,
 * ms: the API server enforces a new binding once its informer has seen it (normally well under a
 * second); object timestamps have whole seconds.
 */
export const POLICY_SETTLE_MS = 5_000;

const ADMISSION = { group: 'admissionregistration.k8s.io', version: 'v1' };

interface Binding {
  metadata?: { creationTimestamp?: string; generation?: number };
  spec?: { policyName?: string; validationActions?: string[]; matchResources?: unknown; paramRef?: unknown };
}

interface Policy {
  metadata?: { creationTimestamp?: string; generation?: number };
  spec?: { failurePolicy?: string };
}

/** `kind` with its indefinite article: "an Alert", "a PullRequestPreview". */
function article(kind: string): string {
  return `${/^[AEIOU]/.test(kind) ? 'an' : 'a'} ${kind}`;
}

/** The policy and binding as last seen: in force since a time (ms), or why not. */
type PolicyState = { enforcedSinceMs: number } | { why: string };

export interface AdmissionPolicyCheckOptions {
  kubeConfig: KubeConfig;
  /** Name of the policy and its binding; default {@link ADMISSION_POLICY_NAME}. */
  name?: string;
  /** Reuse of one look-up, ms; default {@link ADMISSION_CHECK_TTL_MS}. */
  ttlMs?: number;
  /** Kind of the objects the policy checks, for messages; default `PullRequestPreview`. */
  kind?: string;
  now?: () => number;
}

/**
 * Looks the binding and the policy up by name (RBAC: `get` on exactly these names,
 * config/rbac/role.yaml), at most once per TTL. A failed look-up other than 404/403 (network,
 * 5xx) is not kept, so the next sync asks again.
 */
export class AdmissionPolicyCheck {
  readonly #o: AdmissionPolicyCheckOptions;
  readonly #name: string;
  readonly #now: () => number;
  #cached: { state: PolicyState; atMs: number } | undefined;

  constructor(o: AdmissionPolicyCheckOptions) {
    this.#o = o;
    this.#name = o.name ?? ADMISSION_POLICY_NAME;
    this.#now = o.now ?? Date.now;
  }

  /**
   * Whether Secret envRefs of a PullRequestPreview created at `created` (its
   * `metadata.creationTimestamp`) may be applied.
   */
  async secretEnvRefs(created: string | Date | undefined): Promise<SecretEnvRefsVerdict> {
    return this.checked(created, 'its Secrets were');
  }

  /**
   * Whether an object of the policy's `kind` created at `created` (its
   * `metadata.creationTimestamp`) was checked by the policy in force; `what` names what was
   * checked in the reason (e.g. "its Secrets were").
   */
  async checked(created: string | Date | undefined, what: string): Promise<SecretEnvRefsVerdict> {
    const state = await this.#state();
    if ('why' in state) return { allowed: false, why: state.why };
    const createdMs = created === undefined ? NaN : new Date(created).getTime();
    if (!(createdMs >= state.enforcedSinceMs + POLICY_SETTLE_MS)) {
      const kind = this.#o.kind ?? 'PullRequestPreview';
      const since = state.enforcedSinceMs + POLICY_SETTLE_MS;
      return {
        allowed: false,
        why:
          `the ${kind} was created ${Number.isNaN(createdMs) ? '(no creationTimestamp)' : `at ${new Date(createdMs).toISOString()}`}, ` +
          `before ${new Date(since).toISOString()}, from when ${kind}s count as checked by ValidatingAdmissionPolicy ${this.#name}: ` +
          `the later creation of the policy and its binding (${new Date(state.enforcedSinceMs).toISOString()}) plus ` +
          `${POLICY_SETTLE_MS / 1000} s for the API server to start enforcing them, so ${what} never checked; ` +
          `delete and create it again`,
      };
    }
    return { allowed: true };
  }

  async #state(): Promise<PolicyState> {
    const now = this.#now();
    const ttl = this.#o.ttlMs ?? ADMISSION_CHECK_TTL_MS;
    if (this.#cached !== undefined && now - this.#cached.atMs < ttl) return this.#cached.state;
    const looked = await this.#lookUp();
    if (looked.keep) this.#cached = { state: looked.state, atMs: now };
    return looked.state;
  }

  async #lookUp(): Promise<{ state: PolicyState; keep: boolean }> {
    const get = async <T>(plural: string, kind: string): Promise<T | { why: string; keep: boolean }> => {
      try {
        return await kubeRequest<T>(this.#o.kubeConfig, {
          method: 'GET',
          path: objectPath({ ...ADMISSION, plural, name: this.#name }),
          timeoutMs: 10_000,
        });
      } catch (err) {
        const code = errorStatusCode(err);
        if (code === 404) {
          return {
            why: `${kind} ${this.#name} does not exist (install config/admission, or Helm with admissionPolicy.enabled=true, or the Pulumi program deploy/pulumi)`,
            keep: true,
          };
        }
        if (code === 403) {
          return {
            why: `the controller may not read ${kind} ${this.#name} (config/rbac/role.yaml)`,
            keep: true,
          };
        }
        return { why: `cannot read ${kind} ${this.#name}: ${errorMessage(err)}`, keep: false };
      }
    };
    /** Why `o` does not count: changed since it was created (an edit may have let objects through). */
    const changed = (kind: string, o: Binding | Policy): string | undefined =>
      o.metadata?.generation === 1
        ? undefined
        : `${kind} ${this.#name} was changed since it was created (metadata.generation ${String(o.metadata?.generation)}): ${this.#o.kind ?? 'PullRequestPreview'}s written meanwhile may not have been checked; delete it and create it again as shipped (config/admission), then recreate the ${this.#o.kind ?? 'PullRequestPreview'}s`;
    const binding = await get<Binding>(
      'validatingadmissionpolicybindings',
      'ValidatingAdmissionPolicyBinding',
    );
    if ('why' in binding) return { state: { why: binding.why }, keep: binding.keep };
    if (binding.spec?.policyName !== this.#name) {
      return {
        state: {
          why: `ValidatingAdmissionPolicyBinding ${this.#name} binds ${binding.spec?.policyName ?? 'no policy'}, not ${this.#name}`,
        },
        keep: true,
      };
    }
    if (!(binding.spec.validationActions ?? []).includes('Deny')) {
      return {
        state: { why: `ValidatingAdmissionPolicyBinding ${this.#name} does not have validationActions Deny` },
        keep: true,
      };
    }
    if (binding.spec.matchResources !== undefined || binding.spec.paramRef !== undefined) {
      return {
        state: {
          why: `ValidatingAdmissionPolicyBinding ${this.#name} has ${binding.spec.matchResources !== undefined ? 'matchResources' : 'paramRef'}, so it may not check every ${this.#o.kind ?? 'PullRequestPreview'}; apply it as shipped (config/admission)`,
        },
        keep: true,
      };
    }
    const bindingChanged = changed('ValidatingAdmissionPolicyBinding', binding);
    if (bindingChanged !== undefined) return { state: { why: bindingChanged }, keep: true };
    const policy = await get<Policy>('validatingadmissionpolicies', 'ValidatingAdmissionPolicy');
    if ('why' in policy) return { state: { why: policy.why }, keep: policy.keep };
    if ((policy.spec?.failurePolicy ?? 'Fail') !== 'Fail') {
      return {
        state: {
          why: `ValidatingAdmissionPolicy ${this.#name} has failurePolicy ${policy.spec?.failurePolicy ?? ''}: a check that fails would let ${article(this.#o.kind ?? 'PullRequestPreview')} through; delete the policy and create it again as shipped (config/admission, failurePolicy Fail): setting Fail in place changes metadata.generation, which is refused too`,
        },
        keep: true,
      };
    }
    const policyChanged = changed('ValidatingAdmissionPolicy', policy);
    if (policyChanged !== undefined) return { state: { why: policyChanged }, keep: true };
    const since = Math.max(
      Date.parse(binding.metadata?.creationTimestamp ?? ''),
      Date.parse(policy.metadata?.creationTimestamp ?? ''),
    );
    if (Number.isNaN(since)) {
      return {
        state: { why: `ValidatingAdmissionPolicy ${this.#name} has no creationTimestamp` },
        keep: false,
      };
    }
    return { state: { enforcedSinceMs: since }, keep: true };
  }
}
