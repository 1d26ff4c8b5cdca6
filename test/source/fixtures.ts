/**
 * PKO object fixtures for unit tests, shaped as PKO writes them (docs/events.md): the v2.9
 * Stack example after a failed `up`, its Update, and a v1.16 Stack.
 */
import type { Condition } from '../../src/api/meta.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import type { DeriveContext } from '../../src/source/derive.ts';

export const NS = 'team-a';
export const STACK_UID = '6d7c2a1e-0b8f-4c43-9d0e-3f1a2b3c4d5e';
export const UPDATE_UID = 'b1c2d3e4-0000-4000-8000-000000000001';
export const UPDATE_NAME = 'app-dev-198c70e4c21';
export const SHA = '9f1c2e7d0a4b5c6d7e8f90112233445566778899';
export const PREV_SHA = '2b0889718d3e63feeb6079ccd5e4488d8601e353';
export const FAILED_MESSAGE =
  'up failed: failed to run update: exit status 255\ncode: 255\nstdout: ...\nstderr: \u001b[31merror: update failed\u001b[0m\n';

export const ctx: DeriveContext = { reportingController: 'pko-notification-controller' };

export function cond(
  type: string,
  status: Condition['status'],
  reason: string,
  lastTransitionTime = '2026-08-20T11:00:00Z',
  message = '',
): Condition {
  return { type, status, reason, message, lastTransitionTime };
}

/** A PKO v2.9 Stack (git source) after one failed `up`, as PKO writes it. */
export function v2FailedStack(): Stack {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: {
      name: 'app-dev',
      namespace: NS,
      uid: STACK_UID,
      generation: 3,
      labels: { team: 'a', env: 'dev' },
      creationTimestamp: '2026-08-01T00:00:00Z',
    },
    spec: {
      stack: 'acme/app/dev',
      projectRepo: 'https://github.com/acme/app.git',
      branch: 'main',
    },
    status: {
      observedGeneration: 3,
      conditions: [
        cond('Ready', 'False', 'NotReadyInProgress', '2026-08-20T11:00:00Z', 'reconciliation is in progress'),
        cond('Reconciling', 'True', 'RetryingAfterFailure', '2026-08-20T11:02:40Z', '1 update failure(s)'),
      ],
      lastUpdate: {
        generation: 3,
        name: UPDATE_NAME,
        type: 'up',
        state: 'failed',
        message: FAILED_MESSAGE,
        lastAttemptedCommit: SHA,
        lastSuccessfulCommit: PREV_SHA,
        lastResyncTime: '2026-08-20T11:02:40Z',
        failures: 1,
      },
    },
  };
}

/** A v2 Stack whose Update `name` is in flight (`status.currentUpdate`). */
export function v2RunningStack(name = UPDATE_NAME, commit = SHA): Stack {
  const s = v2FailedStack();
  s.status = {
    observedGeneration: 3,
    conditions: [
      cond('Ready', 'False', 'NotReadyInProgress'),
      cond('Reconciling', 'True', 'StackProcessing', '2026-08-20T10:59:58Z'),
    ],
    currentUpdate: { generation: 3, name, commit },
  };
  return s;
}

type Outcome = 'running' | 'succeeded' | 'failed' | 'aborted' | 'canceled' | 'aborted-old';

/** An Update of `type` owned by the Stack above, with the status PKO writes for `outcome`. */
export function update(outcome: Outcome, type = 'up', name = UPDATE_NAME): Update {
  const base: Update = {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Update',
    metadata: {
      name,
      namespace: NS,
      uid: UPDATE_UID,
      generation: 1,
      creationTimestamp: '2026-08-20T11:00:00Z',
      labels: { 'pulumi.com/component': 'stack', 'pulumi.com/stack-name': 'app-dev' },
      ownerReferences: [
        {
          apiVersion: 'auto.pulumi.com/v1alpha1',
          kind: 'Workspace',
          name: 'app-dev',
          uid: 'ws-uid',
          controller: true,
        },
        { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'app-dev', uid: STACK_UID },
      ],
    },
    spec: {
      workspaceName: 'app-dev',
      stackName: 'acme/app/dev',
      type,
      message: `New commit detected: "${SHA}"`,
    },
  };
  const t = '2026-08-20T11:02:39Z';
  switch (outcome) {
    case 'running':
      base.status = {
        observedGeneration: 1,
        conditions: [
          cond('Progressing', 'True', 'Progressing', '2026-08-20T11:00:01Z'),
          cond('Failed', 'False', 'Progressing', '2026-08-20T11:00:01Z'),
          cond('Complete', 'False', 'Progressing', '2026-08-20T11:00:01Z'),
        ],
      };
      break;
    case 'succeeded':
      base.status = {
        observedGeneration: 1,
        startTime: '2026-08-20T11:00:02Z',
        endTime: t,
        permalink: 'https://app.pulumi.com/acme/app/dev/updates/42',
        message: `New commit detected: "${SHA}"`,
        conditions: [
          cond('Progressing', 'False', 'Complete', t),
          cond('Failed', 'False', 'succeeded', t),
          cond('Complete', 'True', 'Updated', t),
        ],
      };
      break;
    case 'failed':
      base.status = {
        observedGeneration: 1,
        message: FAILED_MESSAGE,
        conditions: [
          cond('Progressing', 'False', 'Complete', t),
          cond('Failed', 'True', 'UpdateFailed', t, FAILED_MESSAGE),
          cond('Complete', 'True', 'Updated', t),
        ],
      };
      break;
    case 'aborted':
    case 'canceled':
      base.status = {
        observedGeneration: 1,
        conditions: [
          cond('Progressing', 'False', 'Failed', t),
          cond('Failed', 'True', outcome === 'aborted' ? 'Aborted' : 'Canceled', t),
          cond('Complete', 'True', 'Failed', t),
        ],
      };
      break;
    case 'aborted-old':
      // Older PKO v2 update controller: "was progressing; marking as failed".
      base.status = {
        observedGeneration: 1,
        conditions: [
          cond('Progressing', 'False', 'Failed', t),
          cond('Failed', 'True', 'unknown', t),
          cond('Complete', 'True', 'Aborted', t),
        ],
      };
      break;
  }
  return base;
}

/** A PKO v1.16 Stack: `lastUpdate` has no name/type; state `succeeded|failed`. */
export function v1Stack(state: 'succeeded' | 'failed', lastResyncTime = '2024-08-30T09:15:00Z'): Stack {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: {
      name: 'legacy',
      namespace: NS,
      uid: 'v1-stack-uid',
      generation: 2,
      creationTimestamp: '2024-01-01T00:00:00Z',
    },
    spec: {
      stack: 'acme/legacy/prod',
      projectRepo: 'https://gitlab.com/acme/legacy.git',
      branch: 'refs/heads/master',
    },
    status: {
      observedGeneration: 2,
      lastUpdate: {
        state,
        lastAttemptedCommit: SHA,
        lastSuccessfulCommit: state === 'succeeded' ? SHA : PREV_SHA,
        permalink: 'https://app.pulumi.com/acme/legacy/prod/updates/7',
        lastResyncTime,
      },
    },
  };
}
