/**
 * The Stack informer's cache as the source uses it: Stacks slimmed to what events are derived
 * from, and the set of Stack uids currently known (the ledger prunes entries of deleted Stacks).
 */
import type { Stack } from '../api/pko.ts';
import type { Informer } from '../kube/informer.ts';
import { slim } from '../kube/slim.ts';

/** A Stack without `status.outputs` (never read; can be large) and without managed fields. */
export function slimStack(s: Stack): Stack {
  slim(s);
  if (s.status) delete s.status.outputs;
  return s;
}

/** Uids of the Stacks the informer holds. */
export class LiveStacks {
  readonly #uids = new Set<string>();
  readonly #stacks: Informer<Stack>;
  readonly #deleted: ((uid: string) => void)[] = [];

  constructor(stacks: Informer<Stack>) {
    this.#stacks = stacks;
    stacks.on('add', (s) => {
      if (s.metadata.uid) this.#uids.add(s.metadata.uid);
    });
    stacks.on('delete', (s) => {
      const uid = s.metadata.uid;
      if (!uid) return;
      this.#uids.delete(uid);
      for (const l of this.#deleted) l(uid);
    });
  }

  /** Called with the uid of every Stack that goes away. */
  onDelete(listener: (uid: string) => void): void {
    this.#deleted.push(listener);
  }

  /** Whether a Stack with `uid` exists; undefined until the informer has synced (not known yet). */
  isAlive(uid: string): boolean | undefined {
    return this.#stacks.hasSynced() ? this.#uids.has(uid) : undefined;
  }
}
