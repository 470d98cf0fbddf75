// Directories as tar streams, both ways, a piece at a time (tar-stream encodes and decodes;
// nothing holds a whole archive): packDir() makes the tar of a local directory as it is read
// (the body of PUT …?archive=tar); extractInto() writes the tar of GET …?archive=tar into a
// local directory, refusing what would land outside it as the agent refuses it on its side
// (common/tar/tar_extract.h): no absolute names, no '..', nothing through a symlink (one the
// archive made or one already on disk), hard links only inside; set-id bits cleared, FIFOs
// left out, device nodes refused.

import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { BerthError, InvalidArgumentError } from './errors.js';

/** What uploadDir / downloadDir moved. */
export interface DirTransfer {
  /** Entries written (files, directories, links). */
  entries: number;
  /** Bytes of file data. */
  bytes: number;
  /** Entries left out: sockets, FIFOs, unreadable files. */
  skipped: number;
}

function refuse(name: string, why: string): InvalidArgumentError {
  return new InvalidArgumentError(`the archive's entry '${name}' ${why}: refused`, { code: 'invalid_argument' });
}

/** The tar stream of `root`'s contents (names relative to it), made as it is read. */
export async function packDir(root: string, counts: DirTransfer): Promise<Readable> {
  const st = await fsp.stat(root).catch(() => undefined);
  if (!st?.isDirectory()) {
    throw new InvalidArgumentError(`${root} is not a local directory`, { code: 'invalid_argument' });
  }
  const pack = tar.pack();
  const entry = (header: Partial<tar.Header> & { name: string }, body?: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const done = (e?: Error | null) => (e ? reject(e) : resolve());
      if (body === undefined) pack.entry(header, done);
      else pack.entry(header, body, done);
    });
  (async () => {
    const stack = [''];
    while (stack.length > 0) {
      const rel = stack.pop() as string;
      const names = (await fsp.readdir(path.join(root, rel))).sort();
      const subdirs: string[] = [];
      for (const name of names) {
        const child = rel ? `${rel}/${name}` : name;
        const full = path.join(root, child);
        let s: fs.Stats;
        try {
          s = await fsp.lstat(full);
        } catch {
          continue;  // gone meanwhile
        }
        const base = { name: child, mode: s.mode & 0o7777, mtime: s.mtime };
        if (s.isDirectory()) {
          await entry({ ...base, type: 'directory' });
          counts.entries++;
          subdirs.push(child);
        } else if (s.isSymbolicLink()) {
          await entry({ ...base, type: 'symlink', linkname: await fsp.readlink(full) });
          counts.entries++;
        } else if (s.isFile()) {
          let handle: fsp.FileHandle;
          try {
            handle = await fsp.open(full, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
          } catch {
            counts.skipped++;
            continue;
          }
          try {
            // The size at open is the size in the archive (a growing file is cut there).
            const size = (await handle.stat()).size;
            if (size === 0) {
              await entry({ ...base, type: 'file', size: 0 }, '');
            } else {
              await new Promise<void>((resolve, reject) => {
                const sink = pack.entry({ ...base, type: 'file', size }, (e) => (e ? reject(e) : resolve()));
                pipeline(handle.createReadStream({ start: 0, end: size - 1, autoClose: false,
                                                   highWaterMark: 256 * 1024 }), sink).catch(reject);
              });
            }
            counts.bytes += size;
            counts.entries++;
          } finally {
            await handle.close();
          }
        } else {
          counts.skipped++;
        }
      }
      stack.push(...subdirs.reverse());
    }
    pack.finalize();
  })().catch((e: unknown) => pack.destroy(e instanceof Error ? e : new Error(String(e))));
  return pack as unknown as Readable;
}

function parts(name: string): string[] | null {
  if (name.startsWith('/')) throw refuse(name, 'is an absolute path');
  const p = name.split('/').filter((x) => x !== '' && x !== '.');
  if (p.includes('..')) throw refuse(name, "goes up with '..'");
  return p.length > 0 ? p : null;
}

/** Writes the tar stream `source` into `root` (made if missing) as it arrives. */
export async function extractInto(source: AsyncIterable<Uint8Array>, root: string,
                                  counts: DirTransfer): Promise<void> {
  const top = path.resolve(root);
  await fsp.mkdir(top, { recursive: true });
  const dirs: Array<[string, number, Date]> = [];

  // The local path of an entry, its parents made; refuses a path through a symlink.
  const target = async (name: string): Promise<string | null> => {
    const p = parts(name);
    if (p === null) return null;
    let at = top;
    for (const part of p.slice(0, -1)) {
      at = path.join(at, part);
      const s = await fsp.lstat(at).catch(() => undefined);
      if (!s) {
        await fsp.mkdir(at, { mode: 0o755 });
      } else if (s.isSymbolicLink()) {
        throw refuse(name, `goes through the symlink ${path.relative(top, at)}`);
      } else if (!s.isDirectory()) {
        throw refuse(name, `needs ${path.relative(top, at)} to be a directory`);
      }
    }
    return path.join(at, p[p.length - 1] as string);
  };
  // Room for a non-directory entry: an old file or link goes, a directory is an error.
  const clear = async (full: string, name: string): Promise<void> => {
    const s = await fsp.lstat(full).catch(() => undefined);
    if (!s) return;
    if (s.isDirectory()) throw refuse(name, 'has a directory in its way');
    await fsp.unlink(full);
  };

  const extract = tar.extract();
  const feeding = pipeline(Readable.from(source), extract);
  feeding.catch(() => {});  // its error, if any, also ends the loop below
  try {
    for await (const entry of extract) {
      const h = entry.header;
      const name = h.name;
      const mode = (h.mode ?? 0o644) & 0o1777;  // set-id bits cleared
      const mtime = h.mtime ?? new Date();
      const full = await target(name);
      if (full === null) {
        entry.resume();
        continue;
      }
      switch (h.type) {
        case 'directory': {
          const s = await fsp.lstat(full).catch(() => undefined);
          if (!s || !s.isDirectory()) {
            if (s) await clear(full, name);
            await fsp.mkdir(full, { mode: 0o755 });
          }
          dirs.push([full, mode, mtime]);
          counts.entries++;
          entry.resume();
          break;
        }
        case 'file':
        case 'contiguous-file': {
          await clear(full, name);
          const flags = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;
          const file = await fsp.open(full, flags, 0o600);
          try {
            for await (const chunk of entry) await file.write(chunk as Uint8Array);
            await file.chmod(mode);
            await file.utimes(mtime, mtime);
          } finally {
            await file.close();
          }
          counts.bytes += h.size ?? 0;
          counts.entries++;
          break;
        }
        case 'symlink':
          await clear(full, name);
          await fsp.symlink(h.linkname ?? '', full);
          counts.entries++;
          entry.resume();
          break;
        case 'link': {
          const to = await target(h.linkname ?? '');
          if (to === null || (await fsp.lstat(to)).isSymbolicLink()) throw refuse(name, `is a hard link to '${h.linkname}'`);
          await clear(full, name);
          await fsp.link(to, full);
          counts.entries++;
          entry.resume();
          break;
        }
        case 'fifo':
          counts.skipped++;
          entry.resume();
          break;
        default:
          throw refuse(name, `is a ${h.type ?? 'special file'}`);
      }
    }
    await feeding;
  } catch (e) {
    extract.destroy();
    if (e instanceof BerthError) throw e;
    const err = e as NodeJS.ErrnoException;
    if (err?.code === 'ELOOP') throw refuse('?', 'goes through a symlink');
    throw e;
  }
  // Directories last, deepest first: writing into one changes its mtime.
  for (const [dir, mode, mtime] of dirs.reverse()) {
    await fsp.chmod(dir, mode).catch(() => {});
    await fsp.utimes(dir, mtime, mtime).catch(() => {});
  }
}
