/**
 * Flags → options (src/config.ts): the dev-mode defaults of `npm start`, the dev-cluster flags and
 * the egress flags (B09).
 */
import { describe, expect, it } from 'vitest';
import { UsageError, clusterSource, loadConfig } from '../src/config.ts';

describe('loadConfig', () => {
  it('binds the fixed ports :8080/:8081 by default (the Deployment and its probes use them)', () => {
    const o = loadConfig([], {});
    expect(o.metricsBindAddress).toBe(':8080');
    expect(o.healthProbeBindAddress).toBe(':8081');
    expect(o.devCluster).toBe('never');
    expect(o.logFormat).toBe('auto');
  });

  it.each(['auto', 'always'])(
    'with --dev-cluster=%s binds free loopback ports unless an address is given',
    (mode) => {
      const dev = loadConfig([`--dev-cluster=${mode}`], {});
      expect(dev.metricsBindAddress).toBe('127.0.0.1:0');
      expect(dev.healthProbeBindAddress).toBe('127.0.0.1:0');
      const explicit = loadConfig(
        [`--dev-cluster=${mode}`, '--metrics-bind-address=:9090', '--health-probe-bind-address=0'],
        {},
      );
      expect(explicit.metricsBindAddress).toBe(':9090');
      expect(explicit.healthProbeBindAddress).toBe('0');
    },
  );

  it('keeps the dev cluster under the XDG cache folder (or ~/.cache); --dev-cluster-dir and --fresh override', () => {
    expect(loadConfig([], { XDG_CACHE_HOME: '/c' }).devClusterDir).toBe('/c/pko-notification-controller/dev');
    expect(loadConfig([], {}).devClusterDir).toMatch(/\/\.cache\/pko-notification-controller\/dev$/);
    const o = loadConfig(['--dev-cluster-dir=/d', '--fresh'], {});
    expect(o.devClusterDir).toBe('/d');
    expect(o.fresh).toBe(true);
    expect(loadConfig([], {}).fresh).toBe(false);
  });

  it('--provider-window: 16 by default, a whole number from 1 to 256', () => {
    expect(loadConfig([], {}).providerWindow).toBe(16);
    expect(loadConfig(['--provider-window=1'], {}).providerWindow).toBe(1);
    expect(loadConfig(['--provider-window=256'], {}).providerWindow).toBe(256);
    for (const bad of ['0', '257', '4.5', 'many'])
      expect(() => loadConfig([`--provider-window=${bad}`], {})).toThrow(/--provider-window must be/);
  });

  it('B14: --no-cross-namespace-refs is on by default; =false opens it, alone or =true keeps it', () => {
    expect(loadConfig([], {}).noCrossNamespaceRefs).toBe(true);
    expect(loadConfig(['--no-cross-namespace-refs'], {}).noCrossNamespaceRefs).toBe(true);
    expect(loadConfig(['--no-cross-namespace-refs=true'], {}).noCrossNamespaceRefs).toBe(true);
    expect(loadConfig(['--no-cross-namespace-refs=false'], {}).noCrossNamespaceRefs).toBe(false);
    expect(() => loadConfig(['--no-cross-namespace-refs=no'], {})).toThrow(
      /--no-cross-namespace-refs must be true or false/,
    );
    // Go's flag package (Flux) takes a boolean's value only after `=`: so does this one.
    expect(() => loadConfig(['--no-cross-namespace-refs', 'false'], {})).toThrow(UsageError);
  });

  it('--log-format takes json, pretty or auto', () => {
    expect(loadConfig(['--log-format=pretty'], {}).logFormat).toBe('pretty');
    expect(loadConfig(['--log-format=json'], {}).logFormat).toBe('json');
    expect(() => loadConfig(['--log-format=yaml'], {})).toThrow(UsageError);
  });

  it("treats the dev cluster's own kubeconfig (exported after an earlier npm start) as the dev cluster", () => {
    const devClusterDir = '/home/u/.cache/pko-notification-controller/dev';
    const kubeconfig = `${devClusterDir}/kubeconfig`;
    expect(clusterSource({ kubeconfig: undefined, devClusterDir }, { KUBECONFIG: kubeconfig })).toBe(
      'dev-cluster',
    );
    expect(
      clusterSource({ kubeconfig: undefined, devClusterDir }, { KUBECONFIG: `${kubeconfig}:/other` }),
    ).toBe('dev-cluster');
    expect(clusterSource({ kubeconfig, devClusterDir }, {})).toBe('dev-cluster');
    expect(clusterSource({ kubeconfig: undefined, devClusterDir }, { KUBECONFIG: '/work/kind.yaml' })).toBe(
      'KUBECONFIG',
    );
    expect(clusterSource({ kubeconfig: '/work/kind.yaml', devClusterDir }, {})).toBe('flag');
  });
});

describe('egress flags (B09)', () => {
  it('refuse loopback by default; --egress-allow-loopback allows it (npm start, tests)', () => {
    expect(loadConfig([], {}).egress).toEqual({
      allowLoopback: false,
      allowCIDRs: [],
      denyCIDRs: [],
      allowHosts: [],
      denyHosts: [],
    });
    expect(loadConfig(['--egress-allow-loopback'], {}).egress.allowLoopback).toBe(true);
  });

  it('parse comma-separated CIDRs and host globs', () => {
    const o = loadConfig(
      [
        '--egress-allow-cidrs=10.0.0.0/8, fd00::/8',
        '--egress-deny-cidrs=10.9.0.0/16,192.168.7.7',
        '--egress-allow-hosts=*.example.com,git.internal',
        '--egress-deny-hosts=vault.example.com',
      ],
      {},
    ).egress;
    expect(o.allowCIDRs).toEqual(['10.0.0.0/8', 'fd00::/8']);
    expect(o.denyCIDRs).toEqual(['10.9.0.0/16', '192.168.7.7']);
    expect(o.allowHosts).toEqual(['*.example.com', 'git.internal']);
    expect(o.denyHosts).toEqual(['vault.example.com']);
  });

  it.each([
    ['--egress-allow-cidrs=10.0.0.0/33', /not a CIDR/],
    ['--egress-deny-cidrs=10', /not a CIDR/],
    ['--egress-deny-hosts=a b', /not a host name glob/],
    ['--egress-allow-hosts=https://x', /not a host name glob/],
  ])('%s is a usage error', (flag, why) => {
    expect(() => loadConfig([flag], {})).toThrow(UsageError);
    expect(() => loadConfig([flag], {})).toThrow(why);
  });
});
