// @berth/sdk: Berth's TypeScript SDK (README.md).
export { Workspace, toSeconds } from './workspace.js';
export type {
  WorkspaceInfo, WorkspaceState, CreateOptions, ListOptions, Duration, ListeningPort, ForkOptions, ForkSource,
} from './workspace.js';
export { Commands, CommandHandle, kDefaultCommandTimeoutMs } from './commands.js';
export type { RunOptions, ProcessInfo } from './commands.js';
export { Files, WatchHandle } from './files.js';
export type { EntryInfo, FileOptions, UploadSource, FilesystemEvent, WatchOptions } from './files.js';
export type { DirTransfer } from './dirs.js';
export { Pty, PtyHandle } from './pty.js';
export type { PtyCreateOptions, PtyConnectOptions } from './pty.js';
export { Network } from './network.js';
export type { NetworkStatus, NetworkPolicy, Egress } from './network.js';
export { Desktop, Screenshot, checkActions, checkClipboardText, checkKeys, kControlWaitStepMs, kMaxActions, kMaxClipboard, kMaxTypedText } from './desktop.js';
export type {
  DesktopControl, DesktopTicket, DesktopAction, ActionsResult, ScreenshotOptions, MouseButton, Point, Size,
  WaitForControlChangeOptions,
} from './desktop.js';
export { EventFollower, formatSince, kMaxEventPage } from './events.js';
export type { WorkspaceEvent, EventsOptions } from './events.js';
export { Checkpoints, CheckpointTransaction } from './checkpoints.js';
export type { Checkpoint, RestoreResult, RestoreOptions, CheckpointScopeOptions, CheckpointHost,
              CreateCheckpointOptions, ForkCheckpointOptions, CheckpointDiff, DiffOptions, FileChange,
              PackageVersion, PackageVersionChange } from './checkpoints.js';
export { Templates, TemplateBuildError, kBuildPollFirstMs, kBuildPollMaxMs } from './templates.js';
export type {
  Template, TemplateState, CreateTemplateOptions, CreateTemplateFromOptions, CreateTemplateScriptOptions,
  WaitTemplateOptions,
} from './templates.js';
export { Previews } from './previews.js';
export type { Preview, PreviewOptions } from './previews.js';
export { ApiClient, kDefaultRequestTimeoutMs, kDefaultStreamIdleTimeoutMs } from './client.js';
export type { ConnectionOptions, CallOptions } from './client.js';
export {
  BerthError, InvalidArgumentError, AuthError, ForbiddenError, NotFoundError, ConflictError,
  LockedError, RateLimitError, TimeoutError, UnavailableError, StorageError, CommandExitError,
  errorFrom,
} from './errors.js';
export type { CommandResult, BerthErrorOptions } from './errors.js';
