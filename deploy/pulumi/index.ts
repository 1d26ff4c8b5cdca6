/**
 * Pulumi program: installs pko-notification-controller into the cluster of the ambient
 * kubeconfig (or the stack's `kubernetes:kubeconfig`). Stack configuration (all optional):
 *   namespace, image, replicas, clusterName, serviceMonitor (true/false), nodeOptions,
 *   crossNamespaceRefs (true/false, default false), extraArgs (JSON list of flags).
 * See deploy/pulumi/README.md.
 */
import * as pulumi from '@pulumi/pulumi';
import { PkoNotificationController, type ControllerArgs } from './controller.ts';

const config = new pulumi.Config();
const args: ControllerArgs = {};
const namespace = config.get('namespace');
if (namespace !== undefined) args.namespace = namespace;
const image = config.get('image');
if (image !== undefined) args.image = image;
const replicas = config.getNumber('replicas');
if (replicas !== undefined) args.replicas = replicas;
const clusterName = config.get('clusterName');
if (clusterName !== undefined) args.clusterName = clusterName;
const nodeOptions = config.get('nodeOptions');
if (nodeOptions !== undefined) args.nodeOptions = nodeOptions;
const extraArgs = config.getObject<string[]>('extraArgs');
if (extraArgs !== undefined) args.extraArgs = extraArgs;
const crossNamespaceRefs = config.getBoolean('crossNamespaceRefs');
if (crossNamespaceRefs !== undefined) args.crossNamespaceRefs = crossNamespaceRefs;
const serviceMonitor = config.getBoolean('serviceMonitor');
if (serviceMonitor !== undefined) args.serviceMonitor = serviceMonitor;

const controller = new PkoNotificationController('pko-notification-controller', args);

export const controllerNamespace = controller.namespace;
