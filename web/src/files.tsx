// Files: browse a directory of the guest (/workspace by default; the path is in the address),
// upload with progress (XMLHttpRequest: fetch has no upload progress), download (a folder as a
// tar stream), new folder, rename, delete.
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, csrfHeaders, errorFromText, errorMessage, filePath } from './api';
import { navigate } from './router';
import { Confirm, ErrorNote, Modal, formatBytes, formatTime } from './ui';
import { FileEditor, kMaxEditBytes } from './editor';

interface Entry {
  name: string;
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  mode: string;
  mtime: string;
  owner: string;
  link_target?: string;
}

interface Upload {
  id: number;
  name: string;
  loaded: number;
  total: number;
  error?: string;
  done?: boolean;
}

function join(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

function parent(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

function normalize(path: string): string {
  const parts = path.split('/').filter((p) => p && p !== '.');
  return '/' + parts.join('/');
}

let uploadIds = 0;

export function Files({ ws, base, path, file }: { ws: string; base: string; path: string; file: string | null }) {
  const dir = normalize(path);
  const editing = file ? normalize(file) : null;
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [renaming, setRenaming] = useState<Entry | null>(null);
  const [deleting, setDeleting] = useState<Entry | null>(null);
  const [mkdir, setMkdir] = useState(false);
  const [dragging, setDragging] = useState(false);
  const fileInput = useRef<HTMLInputElement>(null);

  const go = (p: string) => navigate(`${base}/files?path=${encodeURIComponent(normalize(p))}`);
  const openHref = (p: string) => `${base}/files?path=${encodeURIComponent(dir)}&file=${encodeURIComponent(p)}`;

  const load = async () => {
    setLoading(true);
    try {
      const listing = await call<{ entries: Entry[] }>('GET', filePath(ws, dir));
      if (!Array.isArray(listing?.entries)) throw new Error(`${dir} is not a directory`);
      listing.entries.sort((a, b) => (a.type === 'dir' ? 0 : 1) - (b.type === 'dir' ? 0 : 1) || a.name.localeCompare(b.name));
      setEntries(listing.entries);
      setError(null);
    } catch (e) {
      setEntries(null);
      setError(errorMessage(e));
    } finally {
      setLoading(false);
    }
  };
  // Loaded again when the editor closes: a save may have changed the listing.
  useEffect(() => { if (!editing) void load(); }, [ws, dir, editing]);

  const upload = (files: FileList | File[]) => {
    for (const file of Array.from(files)) {
      const id = ++uploadIds;
      const update = (u: Partial<Upload>) => setUploads((all) => all.map((x) => (x.id === id ? { ...x, ...u } : x)));
      setUploads((all) => [...all, { id, name: file.name, loaded: 0, total: file.size }]);
      const xhr = new XMLHttpRequest();
      xhr.open('PUT', filePath(ws, join(dir, file.name)));
      for (const [k, v] of Object.entries(csrfHeaders('PUT'))) xhr.setRequestHeader(k, v);
      xhr.setRequestHeader('Content-Type', 'application/octet-stream');
      xhr.upload.onprogress = (e) => update({ loaded: e.loaded, total: e.lengthComputable ? e.total : file.size });
      xhr.onload = () => {
        if (xhr.status >= 200 && xhr.status < 300) {
          update({ loaded: file.size, done: true });
          window.setTimeout(() => setUploads((all) => all.filter((x) => x.id !== id)), 4000);
          void load();
        } else {
          update({ error: errorFromText(xhr.status, xhr.statusText, xhr.responseText).message });
        }
      };
      xhr.onerror = () => update({ error: 'the connection to berthd failed during the upload' });
      xhr.send(file);
    }
  };

  const doMkdir = async (name: string) => {
    try {
      await call('POST', `${filePath(ws, join(dir, name))}?op=mkdir`);
      setMkdir(false);
      void load();
    } catch (e) {
      setError(errorMessage(e));
      setMkdir(false);
    }
  };
  const doRename = async (e: Entry, name: string) => {
    try {
      await call('POST', `${filePath(ws, e.path)}?op=move&to=${encodeURIComponent(join(parent(e.path), name))}`);
      void load();
    } catch (err) {
      setError(errorMessage(err));
    }
    setRenaming(null);
  };
  const doDelete = async (e: Entry) => {
    setDeleting(null);
    try {
      await call('DELETE', `${filePath(ws, e.path)}${e.type === 'dir' ? '?recursive=1' : ''}`);
      void load();
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  const crumbs = dir.split('/').filter(Boolean);
  if (editing) return <FileEditor key={editing} ws={ws} path={editing} onClose={() => go(dir)} />;
  return (
    <div class={`files${dragging ? ' dragging' : ''}`}
         onDragOver={(e) => { e.preventDefault(); setDragging(true); }}
         onDragLeave={() => setDragging(false)}
         onDrop={(e) => { e.preventDefault(); setDragging(false); if (e.dataTransfer?.files.length) upload(e.dataTransfer.files); }}>
      <nav aria-label="Folder" class="pathbar">
        <a href={`${base}/files?path=%2F`} aria-label="the root folder">/</a>{' '}
        {crumbs.map((c, i) => {
          const p = '/' + crumbs.slice(0, i + 1).join('/');
          return <span key={p}><a href={`${base}/files?path=${encodeURIComponent(p)}`}
                                  aria-current={i === crumbs.length - 1 ? 'page' : undefined}>{c}</a>{i < crumbs.length - 1 && ' / '}</span>;
        })}
      </nav>
      <form class="toolbar" onSubmit={(e) => {
        e.preventDefault();
        const v = (new FormData(e.currentTarget as HTMLFormElement).get('go') as string).trim();
        if (v) go(v.startsWith('/') ? v : join(dir, v));
      }}>
        <label class="grow">Go to <input name="go" key={dir} defaultValue={dir} spellcheck={false} autoComplete="off" /></label>
        <button type="submit" class="quiet">Open</button>
        <button type="button" onClick={() => fileInput.current?.click()}>Upload…</button>
        <input ref={fileInput} type="file" multiple hidden aria-label="Files to upload"
               onChange={(e) => { const f = (e.currentTarget as HTMLInputElement).files; if (f) upload(f); (e.currentTarget as HTMLInputElement).value = ''; }} />
        <button type="button" onClick={() => setMkdir(true)}>New folder</button>
        <button type="button" class="quiet" onClick={() => void load()} disabled={loading}>Refresh</button>
        <a class="button quiet" href={`${filePath(ws, dir)}?archive=tar`} download={`${crumbs.at(-1) ?? 'root'}.tar`}>Download folder (tar)</a>
      </form>
      {uploads.length > 0 && (
        <ul class="uploads" aria-label="Uploads">
          {uploads.map((u) => (
            <li key={u.id}>
              <span>{u.name}</span>
              {u.error ? <ErrorNote message={`Upload of ${u.name} failed: ${u.error}`}
                                    onDismiss={() => setUploads((all) => all.filter((x) => x.id !== u.id))} />
                : <>
                    <progress max={u.total || 1} value={u.loaded} aria-label={`Uploading ${u.name}`} />
                    <span class="muted">{u.done ? 'done' : `${formatBytes(u.loaded)} of ${formatBytes(u.total)}`}</span>
                  </>}
            </li>
          ))}
        </ul>
      )}
      {error && <ErrorNote message={error} onDismiss={() => setError(null)} />}
      {entries && (
        <table class="list files-list">
          <thead><tr><th scope="col">Name</th><th scope="col">Size</th><th scope="col">Modified</th><th scope="col">Owner</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {dir !== '/' && (
              <tr><td colSpan={5}><a href={`${base}/files?path=${encodeURIComponent(parent(dir))}`}>.. (up)</a></td></tr>
            )}
            {entries.length === 0 && <tr><td colSpan={5} class="muted">This folder is empty. Drop files here to upload them.</td></tr>}
            {entries.map((e) => (
              <tr key={e.path} data-file={e.name}>
                <td data-label="Name">
                  {e.type === 'dir'
                    ? <a href={`${base}/files?path=${encodeURIComponent(e.path)}`}>{e.name}/</a>
                    : e.type === 'file' && e.size <= kMaxEditBytes
                      ? <a href={openHref(e.path)} title="Open in the editor">{e.name}</a>
                      : <a href={filePath(ws, e.path)} download={e.name} title="Too large for the editor: downloads it">{e.name}</a>}
                  {e.link_target && <span class="muted"> → {e.link_target}</span>}
                </td>
                <td data-label="Size">{e.type === 'dir' ? '—' : formatBytes(e.size)}</td>
                <td data-label="Modified">{formatTime(e.mtime)}</td>
                <td data-label="Owner">{e.owner}</td>
                <td class="row-actions">
                  <div class="buttons">
                    <a class="button quiet" href={e.type === 'dir' ? `${filePath(ws, e.path)}?archive=tar` : filePath(ws, e.path)}
                       download={e.type === 'dir' ? `${e.name}.tar` : e.name} aria-label={`Download ${e.name}`}>Download</a>
                    <button type="button" class="quiet" onClick={() => setRenaming(e)} aria-label={`Rename ${e.name}`}>Rename</button>
                    <button type="button" class="quiet danger" onClick={() => setDeleting(e)} aria-label={`Delete ${e.name}`}>Delete</button>
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <NameDialog open={mkdir} title="New folder" action="Create" initial="" onCancel={() => setMkdir(false)} onDone={doMkdir} />
      <NameDialog open={!!renaming} title={`Rename ${renaming?.name ?? ''}`} action="Rename" initial={renaming?.name ?? ''}
                  onCancel={() => setRenaming(null)} onDone={(n) => renaming && doRename(renaming, n)} />
      <Confirm open={!!deleting} danger title={`Delete ${deleting?.name ?? ''}?`} action="Delete"
               message={deleting?.type === 'dir' ? 'The folder and everything in it is removed.' : 'The file is removed.'}
               onCancel={() => setDeleting(null)} onConfirm={() => deleting && doDelete(deleting)} />
    </div>
  );
}

function NameDialog({ open, title, action, initial, onCancel, onDone }:
  { open: boolean; title: string; action: string; initial: string; onCancel: () => void; onDone: (name: string) => void }) {
  return (
    <Modal title={title} open={open} onClose={onCancel}>
      <form onSubmit={(e) => {
        e.preventDefault();
        const v = String(new FormData(e.currentTarget as HTMLFormElement).get('name') ?? '').trim();
        if (v && !v.includes('/')) onDone(v);
      }}>
        <label>Name <input name="name" defaultValue={initial} required pattern="[^/]+" title="a name without /" autoFocus spellcheck={false} autoComplete="off" /></label>
        <div class="actions">
          <button type="button" class="quiet" onClick={onCancel}>Cancel</button>
          <button type="submit">{action}</button>
        </div>
      </form>
    </Modal>
  );
}
