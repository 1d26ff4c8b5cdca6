/**
 * The normalised notification event (design §3). Not called `Event`: Node declares a global of
 * that name.
 */
import type { EventReason, Severity } from './v1alpha1.ts';

/** Metadata keys the source fills when known (design §3); Alerts may add their own. */
export const EVENT_METADATA_KEYS = [
  'revision',
  'commit',
  'repository',
  'branch',
  'stack',
  'updateName',
  'updateType',
  'permalink',
  'failures',
  'pullRequest',
] as const;
export type EventMetadataKey = (typeof EVENT_METADATA_KEYS)[number];

export interface InvolvedObject {
  apiVersion: string;
  kind: 'Stack' | 'Update';
  namespace: string;
  name: string;
  uid: string;
}

export interface NotificationEvent {
  /** Stable identity: the same run and phase always yield the same id (e.g. `<stack uid>/<update>/<phase>`). */
  id: string;
  involvedObject: InvolvedObject;
  /** Labels of the involved object, for `eventSources[].matchLabels`. */
  labels: Record<string, string>;
  severity: Severity;
  reason: EventReason;
  /** Human-readable, ANSI-free, bounded. */
  message: string;
  /** RFC 3339. */
  timestamp: string;
  metadata: Partial<Record<string, string>>;
  reportingController: string;
}
