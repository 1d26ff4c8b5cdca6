import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { errorMessage, loadKubeConfig, objectPath } from '../../src/kube/client.ts';

describe('objectPath', () => {
  it('builds core and group paths, namespaced or not', () => {
    expect(objectPath({ group: '', version: 'v1', plural: 'configmaps' })).toBe('/api/v1/configmaps');
    expect(objectPath({ group: '', version: 'v1', plural: 'configmaps', namespace: 'ns', name: 'cm' })).toBe(
      '/api/v1/namespaces/ns/configmaps/cm',
    );
    expect(objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: undefined })).toBe(
      '/apis/pulumi.com/v1/stacks',
    );
    expect(
      objectPath({
        group: 'notification.pko.dev',
        version: 'v1alpha1',
        plural: 'providers',
        namespace: 'a',
        name: 'p',
      }),
    ).toBe('/apis/notification.pko.dev/v1alpha1/namespaces/a/providers/p');
    expect(objectPath({ group: '', version: 'v1', plural: 'namespaces', name: 'x' })).toBe(
      '/api/v1/namespaces/x',
    );
  });
});

describe('loadKubeConfig', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'pkonc-kc-'));
  it('loads an explicit kubeconfig file', () => {
    const file = path.join(dir, 'ok.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://10.1.2.3:6443"}}]',
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n'),
    );
    expect(loadKubeConfig({ kubeconfig: file }).getCurrentCluster()?.server).toBe('https://10.1.2.3:6443');
  });

  it('names the file when it is missing or has no current cluster', () => {
    const missing = path.join(dir, 'missing.yaml');
    expect(() => loadKubeConfig({ kubeconfig: missing })).toThrow(
      `kubeconfig file ${missing} does not exist`,
    );
    const empty = path.join(dir, 'empty.yaml');
    writeFileSync(empty, 'apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n');
    expect(() => loadKubeConfig({ kubeconfig: empty })).toThrow(
      `kubeconfig file ${empty} has no current context`,
    );
  });
});

describe('errorMessage', () => {
  it('adds the cause that undici hides', () => {
    const err = new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 127.0.0.1:1') });
    expect(errorMessage(err)).toBe('fetch failed: connect ECONNREFUSED 127.0.0.1:1');
    expect(errorMessage('x')).toBe('x');
  });
});
