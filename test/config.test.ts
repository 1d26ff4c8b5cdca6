/** Flags → options (src/config.ts): the egress flags (B09) and their defaults. */
import { describe, expect, it } from 'vitest';
import { loadConfig, UsageError } from '../src/config.ts';

describe('egress flags', () => {
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
