// @berth/sdk: Berth's TypeScript SDK (README.md).
export { Workspace, toSeconds } from './workspace.js';
export type { WorkspaceInfo, WorkspaceState, CreateOptions, ListOptions, Duration, ListeningPort } from './workspace.js';
export { Commands, CommandHandle, kDefaultCommandTimeoutMs } from './commands.js';
export type { RunOptions, ProcessInfo } from './commands.js';
export { Files } from './files.js';
export type { EntryInfo, FileOptions, UploadSource } from './files.js';
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
