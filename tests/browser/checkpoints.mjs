#!/usr/bin/env node
// The web UI's Checkpoints tab and templates in Debian's Chromium against a real berthd on
// --transport unix (each workspace's agent a real berth-agent host process; no VM), which serves
// web/dist. libvirt's test driver snapshots only a stopped domain's disks and takes no memory,
// so checkpoints are taken of a stopped workspace here (a running one's, and memory, are for the
// e2e tests on a real VM), and templates, which need a checkpoint with memory, are stood in for
// by the page's own routes for /v1/templates (said where it is done); the create from a template
// still goes to berthd. A checkpoint diff needs a guest to mount the checkpoint's disks: berthd's
// refusal here is shown as it is, and a guest's answer is the page's route.
//
//   BERTHD_BIN=… BERTH_AGENT_BIN=… node checkpoints.mjs [--screenshots DIR]
//
// Each step below is named by what it proves. No uncaught error or CSP refusal on any page, and
// axe-core finds no serious or critical violation on any page or dialog shot, at laptop and phone
// width. Screenshots cp-*.png go to --screenshots (CTest: build/Testing/webui-screenshots).
// Exit 0 PASS, 1 FAIL.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { startBerthd, waitFor } from '../../sdk/typescript/test/harness.mjs';
import { Failure, axeViolations, check, kStep, kViewports, launchChromium, shot as shotIn, signIn } from './webui_lib.mjs';

const T = 'integration_webui_checkpoints';
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');

const { values: opts } = parseArgs({ options: { screenshots: { type: 'string', default: path.join(root, 'build', 'Testing', 'webui-screenshots') } } });

function log(m) {
  process.stderr.write(`${T}: ${m}\n`);
}

const a11y = [];
async function shot(page, name) {
  await shotIn(page, opts.screenshots, name);
  const vp = page.viewportSize();
  for (const v of await axeViolations(page)) a11y.push(`${name} at ${vp.width}x${vp.height}: ${v}`);
}

function watchPage(page, problems) {
  page.on('pageerror', (e) => problems.push(`uncaught: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text()) && !/inline style/i.test(m.text())) {
      problems.push(`CSP: ${m.text()}`);
    }
  });
}

async function step(what, body) {
  const started = Date.now();
  await body();
  log(`ok: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}

/** Clicks `click` and returns the first request it makes that `match`es, with its answer. */
async function requestOf(page, match, click) {
  const [req] = await Promise.all([page.waitForRequest(match), click()]);
  const res = await req.response();
  return { url: new URL(req.url()), body: req.postDataJSON(), status: res?.status(), answer: res ? await res.json().catch(() => null) : null };
}

const isPost = (suffix) => (r) => r.method() === 'POST' && new URL(r.url()).pathname.endsWith(suffix);
const isDiff = (url) => /\/v1\/workspaces\/[^/]+\/checkpoints\/[^/]+\/diff$/.test(url.pathname);

/** A guest's answer to a diff of checkpoint `from` (common/protocol/diff.h): every kind of file
 * change, a directory added whole, the added list cut at max_entries (1000 of 1204), and each
 * package list. */
function cannedDiff(from, to) {
  const added = [
    { path: '/workspace/app/node_modules', type: 'dir', size: 48_213_504, entries: 5012 },
    { path: '/workspace/app/server.js', type: 'file', size: 2310 },
    { path: '/home/agent/.npmrc', type: 'symlink', size: 0 },
    ...Array.from({ length: 997 }, (_, i) => ({ path: `/workspace/app/dist/chunk-${String(i).padStart(3, '0')}.js`, type: 'file', size: 1024 + i })),
  ];
  return {
    from, to, paths: ['/workspace', '/home/agent'],
    files: {
      added,
      changed: [{ path: '/workspace/app/package.json', type: 'file', size: 812 }, { path: '/workspace/app', type: 'dir', size: 0 }],
      removed: [{ path: '/workspace/old-notes.txt', type: 'file', size: 12 },
                { path: '/home/agent/.cache/pip', type: 'dir', size: 3_500_000, entries: 41 }],
      counts: { added: 1204, changed: 2, removed: 2 },
      truncated: true,
    },
    packages: {
      installed: [{ name: 'cowsay', version: '3.03+dfsg2-8' }],
      changed: [{ name: 'curl', from: '7.88.1-10', to: '7.88.1-10+deb12u8' }],
      removed: [{ name: 'vim', version: '2:9.0.1378-2' }],
    },
    took_ms: 1234,
  };
}

async function run(browser, berthd, base) {
  const { api } = berthd;
  const problems = [];
  const ctx = await browser.newContext({ viewport: kViewports.laptop });
  const page = await ctx.newPage();
  page.setDefaultTimeout(kStep);
  watchPage(page, problems);

  const made = await api('POST', '/v1/workspaces', { name: 'cp-demo' });
  check(made.status === 201, `creating cp-demo: ${made.status} ${JSON.stringify(made.body)}`);
  const wsId = made.body.id;
  const wait = async (state) => {
    const r = await api('POST', '/v1/workspaces/cp-demo/wait', { state, timeout_s: 60 });
    check(r.status === 200 && r.body.state === state, `waiting for cp-demo to be ${state}: ${r.status} ${JSON.stringify(r.body)}`);
  };
  await wait('running');

  await signIn(page, base, berthd.key);
  await page.goto(`${base}/w/cp-demo/checkpoints`);
  const panel = page.locator('.checkpoints');
  const memory = panel.getByLabel('with memory');
  const pill = page.locator('.heading .pill');

  await step('memory is offered only while the workspace is running or hibernated', async () => {
    await panel.getByText('No checkpoints yet').waitFor();
    await pill.filter({ hasText: 'running' }).waitFor();
    check(await memory.isEnabled(), 'running, "with memory" is disabled');
    await api('POST', '/v1/workspaces/cp-demo/hibernate');
    await pill.filter({ hasText: 'hibernated' }).waitFor();
    check(await memory.isEnabled(), 'hibernated, "with memory" is disabled');
    await api('POST', '/v1/workspaces/cp-demo/start');
    await pill.filter({ hasText: 'running' }).waitFor();
    await page.getByRole('group', { name: 'Actions for cp-demo' }).getByRole('button', { name: 'Stop' }).click();
    await pill.filter({ hasText: 'stopped' }).waitFor();
    check(await memory.isDisabled(), 'stopped, "with memory" is still enabled');
    await panel.getByText('A stopped workspace has no memory to keep').waitFor();
  });

  let first;
  await step('a checkpoint taken in the panel is asked of berthd as named and appears in the list', async () => {
    await panel.getByLabel('Name').fill('before-upgrade');
    const taken = await requestOf(page, isPost('/checkpoints'), () => panel.getByRole('button', { name: 'Checkpoint now' }).click());
    check(JSON.stringify(taken.body) === JSON.stringify({ memory: false, name: 'before-upgrade' }),
          `the checkpoint request: ${JSON.stringify(taken.body)}`);
    check(taken.status === 201, `berthd answered ${taken.status}: ${JSON.stringify(taken.answer)}`);
    first = taken.answer;
    const row = panel.locator('tr[data-checkpoint="before-upgrade"]');
    await row.waitFor();
    await row.getByText('disks only').waitFor();
    await row.getByText('taken while stopped').waitFor();
    await row.locator('td[data-label="Parent"]').getByText('the image').waitFor();
    check(/\d/.test(await row.locator('td[data-label="Size"]').innerText()), 'the row shows no size');
    await panel.getByRole('status').filter({ hasText: 'Checkpoint before-upgrade taken' }).waitFor();
    // A second one stands on the first: its parent column names it.
    await panel.getByLabel('Name').fill('second');
    await panel.getByRole('button', { name: 'Checkpoint now' }).click();
    const second = panel.locator('tr[data-checkpoint="second"]');
    await second.locator('td[data-label="Parent"]').getByText('before-upgrade').waitFor();
    check(await panel.locator('tbody tr').first().getAttribute('data-checkpoint') === 'second', 'the newest checkpoint is not first');
    const listed = (await api('GET', '/v1/workspaces/cp-demo/checkpoints')).body.checkpoints.map((c) => c.name);
    check(JSON.stringify(listed) === '["second","before-upgrade"]', `berthd lists ${JSON.stringify(listed)}`);
  });

  let undoName, undoId;
  await step('restore asks first, says the current state is checkpointed, and names the undo checkpoint berthd made', async () => {
    const restores = [];
    const count = (r) => r.url().endsWith('/restore') && restores.push(r);
    page.on('request', count);
    const row = panel.locator('tr[data-checkpoint="before-upgrade"]');
    await row.getByRole('button', { name: 'Restore' }).click();
    const dialog = page.getByRole('dialog', { name: 'Restore before-upgrade?' });
    await dialog.getByText('Its disks go back to').waitFor();
    const undo = dialog.getByLabel('Checkpoint the current state first (undo)');
    check(await undo.isChecked(), 'undo is not on by default');
    await dialog.getByText('kept as a checkpoint first').waitFor();
    await shot(page, 'cp-02-restore-dialog');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    check(restores.length === 0, 'Cancel sent a restore');

    await row.getByRole('button', { name: 'Restore' }).click();
    const done = await requestOf(page, isPost('/restore'), () => dialog.getByRole('button', { name: 'Restore', exact: true }).click());
    check(JSON.stringify(done.body) === '{"undo":true}', `the restore request: ${JSON.stringify(done.body)}`);
    check(done.status === 200 && done.answer.undo?.kind === 'before_restore', `berthd answered ${done.status}: ${JSON.stringify(done.answer)}`);
    undoName = done.answer.undo.name;
    undoId = done.answer.undo.id;
    const note = panel.getByRole('status').filter({ hasText: 'Restored before-upgrade' });
    await note.filter({ hasText: `kept as checkpoint ${undoName}` }).waitFor();
    const undoRow = panel.locator(`tr[data-checkpoint="${undoName}"]`);
    await undoRow.getByText('undo point').waitFor();
    check(await undoRow.getAttribute('class') === 'just', 'the undo checkpoint is not the highlighted row');
    await shot(page, 'cp-01-panel');
    // The note's undo opens the restore of that checkpoint.
    await note.getByRole('button', { name: 'restore it to undo this restore' }).click();
    const undoDialog = page.getByRole('dialog', { name: `Restore ${undoName}?` });
    await undoDialog.getByRole('button', { name: 'Cancel' }).click();
    await undoDialog.waitFor({ state: 'hidden' });

    // Without undo: the dialog says the state is lost, and berthd is asked for no undo.
    await panel.locator('tr[data-checkpoint="second"]').getByRole('button', { name: 'Restore' }).click();
    const again = page.getByRole('dialog', { name: 'Restore second?' });
    await again.getByLabel('Checkpoint the current state first (undo)').uncheck();
    await again.getByText('is lost').waitFor();
    const bare = await requestOf(page, isPost('/restore'), () => again.getByRole('button', { name: 'Restore and discard' }).click());
    check(JSON.stringify(bare.body) === '{"undo":false}', `the restore without undo: ${JSON.stringify(bare.body)}`);
    check(bare.status === 200 && bare.answer.undo === null, `berthd answered ${bare.status}: ${JSON.stringify(bare.answer)}`);
    await panel.getByRole('status').filter({ hasText: 'the state it left was discarded' }).waitFor();
    check(await panel.locator('tbody tr').count() === 3, 'a restore without undo added a checkpoint');
    page.off('request', count);
  });

  const forks = [];
  await step('fork with a count makes that many workspaces, lists them and shows them on the checkpoint', async () => {
    await panel.locator('tr[data-checkpoint="before-upgrade"]').getByRole('button', { name: 'Fork' }).click();
    const dialog = page.getByRole('dialog', { name: 'Fork before-upgrade' });
    await dialog.getByLabel('Name').fill('cp-twig');
    await dialog.getByLabel('How many').fill('2');
    await dialog.getByText('Makes cp-twig-1 … cp-twig-2.').waitFor();
    await shot(page, 'cp-03-fork-dialog');
    const r = await requestOf(page, isPost('/fork'), () => dialog.getByRole('button', { name: 'Make 2 forks' }).click());
    check(JSON.stringify(r.body) === '{"name":"cp-twig","count":2}', `the fork request: ${JSON.stringify(r.body)}`);
    check(r.status === 201 && r.answer.workspaces.length === 2, `berthd answered ${r.status}: ${JSON.stringify(r.answer)}`);
    const fresh = panel.locator('.fresh');
    for (const name of ['cp-twig-1', 'cp-twig-2']) {
      await fresh.getByRole('link', { name }).waitFor();
      await fresh.locator('li', { hasText: name }).getByText('running', { exact: true }).waitFor();
      forks.push(name);
    }
    for (const w of r.answer.workspaces) check(w.forked_from === first.id, `${w.name} is forked from ${w.forked_from}`);
    const cell = panel.locator('tr[data-checkpoint="before-upgrade"] td[data-label="Forks"]');
    await cell.getByRole('link', { name: 'cp-twig-2' }).waitFor();
    await fresh.getByRole('button', { name: 'Done' }).click();

    // One fork: the page goes to it.
    await panel.locator('tr[data-checkpoint="before-upgrade"]').getByRole('button', { name: 'Fork' }).click();
    await dialog.getByLabel('Name').fill('cp-leaf');
    await dialog.getByRole('button', { name: 'Fork', exact: true }).click();
    await page.waitForURL(`${base}/w/cp-leaf`);
    await page.getByRole('heading', { name: 'cp-leaf', level: 1 }).waitFor();
    await page.getByText(`fork of checkpoint ${first.id}`).waitFor();
    forks.push('cp-leaf');
  });

  await step('delete of a checkpoint forks stand on is refused, and the dialog shows berthd\'s 409 naming them', async () => {
    await page.goto(`${base}/w/cp-demo/checkpoints`);
    await panel.locator('tr[data-checkpoint="before-upgrade"]').getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete checkpoint before-upgrade?' });
    const r = await requestOf(page, (q) => q.method() === 'DELETE', () => dialog.getByRole('button', { name: 'Delete', exact: true }).click());
    check(r.status === 409, `berthd answered ${r.status}: ${JSON.stringify(r.answer)}`);
    const alert = dialog.getByRole('alert');
    await alert.waitFor();
    const text = await alert.innerText();
    check(text.includes(r.answer.error.message) && forks.every((f) => r.answer.error.message.includes(f)),
          `the dialog shows "${text}", berthd said "${r.answer.error.message}"`);
    for (const name of forks) await dialog.locator('.blockers').getByRole('link', { name }).waitFor();
    await shot(page, 'cp-04-delete-refused');
    await dialog.getByRole('button', { name: 'Close' }).click();
    check(await panel.locator('tr[data-checkpoint="before-upgrade"]').count() === 1, 'the refused checkpoint left the list');
    log(`the refusal: "${r.answer.error.message}"`);
  });

  await step('delete of a checkpoint nothing stands on removes it from the list', async () => {
    await panel.locator('tr[data-checkpoint="second"]').getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete checkpoint second?' });
    await dialog.getByRole('button', { name: 'Delete', exact: true }).click();
    await panel.locator('tr[data-checkpoint="second"]').waitFor({ state: 'detached' });
    await panel.getByRole('status').filter({ hasText: 'Checkpoint second deleted' }).waitFor();
    check((await api('GET', '/v1/workspaces/cp-demo/checkpoints/second')).status === 404, 'berthd still has "second"');
  });

  const diffPanel = panel.locator('section.diff');
  // No guest here: berthd cannot plug the checkpoint's disks into the test driver's domain (409),
  // and a host agent would mount none (412). Either way the panel shows berthd's own words.
  await step('a diff against berthd (no guest to mount the checkpoint\'s disks) shows berthd\'s refusal in the panel', async () => {
    const row = panel.locator('tr[data-checkpoint="before-upgrade"]');
    const button = row.getByRole('button', { name: 'Diff' });
    check(await button.getAttribute('aria-expanded') === 'false', 'a closed diff\'s button is expanded');
    const r = await requestOf(page, (q) => q.method() === 'GET' && isDiff(new URL(q.url())), () => button.click());
    check(r.url.pathname.endsWith(`/checkpoints/${first.id}/diff`) && r.url.searchParams.get('to') === 'current'
          && r.url.searchParams.get('max_entries') === '1000', `the diff request: ${r.url}`);
    const refusal = /it mounts no disks|plugging the checkpoint's disks in: .*not supported by the connection driver/;
    check((r.status === 412 || r.status === 409) && refusal.test(r.answer?.error?.message),
          `berthd answered ${r.status}: ${JSON.stringify(r.answer)}`);
    await diffPanel.getByRole('heading', { name: 'Changes since before-upgrade' }).waitFor();
    const alert = diffPanel.getByRole('alert');
    await alert.filter({ hasText: `Could not compare: ${r.answer.error.message}` }).waitFor();
    check(refusal.test(await alert.innerText()), `the panel shows "${await alert.innerText()}"`);
    check(await button.getAttribute('aria-expanded') === 'true', 'the open diff\'s button is not expanded');
    check((await row.getAttribute('class'))?.includes('diffing'), 'the diffed row is not marked');
    await shot(page, 'cp-11-diff-refused');
    log(`the diff's refusal: "${r.answer.error.message}"`);
  });

  // From here on, a diff is answered by the page's route: what a guest would say.
  const diffAsked = [];
  let release = null;  // while set, the route holds its answer: the panel's progress is seen
  const answerDiff = async (route) => {
    const url = new URL(route.request().url());
    diffAsked.push(url);
    if (release) await release.promise;
    return route.fulfill({ status: 200, contentType: 'application/json',
                           body: JSON.stringify(cannedDiff(first.id, url.searchParams.get('to'))) });
  };
  await ctx.route(isDiff, answerDiff);

  await step('a diff shows progress, then the files (a directory as its entries), the counts, the truncation and the packages', async () => {
    release = {};
    release.promise = new Promise((resolve) => { release.resolve = resolve; });
    await diffPanel.getByRole('button', { name: 'Try again' }).click();
    const busy = diffPanel.getByRole('status').filter({ hasText: 'Comparing before-upgrade with now…' });
    await busy.waitFor();
    await diffPanel.getByText('walks the files under /workspace and the home directory').waitFor();
    check(await diffPanel.getByRole('button', { name: 'Compare again' }).isDisabled(), 'Compare again is offered while comparing');
    check(await diffPanel.getByRole('alert').count() === 0, 'the last error is still shown while comparing');
    check(diffAsked.length === 1 && diffAsked[0].searchParams.get('to') === 'current', `asked ${diffAsked.map(String)}`);
    await shot(page, 'cp-12-diff-comparing');
    const held = release;
    release = null;
    held.resolve();
    await busy.waitFor({ state: 'detached' });

    const sum = await diffPanel.locator('.diffsum').innerText();
    for (const want of ['From before-upgrade to now', '1204 added, 2 changed, 2 removed in /workspace and /home/agent',
                        '1 installed, 1 changed, 1 removed packages', 'Compared in 1.2 s']) {
      check(sum.includes(want), `the summary says "${sum}", not "${want}"`);
    }
    const cut = await diffPanel.getByRole('note').innerText();
    check(cut.includes('Not everything is listed') && cut.includes('added: 1000 of 1204 shown'), `the truncation note says "${cut}"`);
    const group = (name) => diffPanel.locator('details.diffgroup', { has: page.locator('summary', { hasText: name }) });
    const added = group('Added');
    check(await added.locator('summary .count').innerText() === '1204', 'the Added group does not count 1204');
    check(await added.locator('tbody tr').count() === 1000, `the Added group lists ${await added.locator('tbody tr').count()} rows`);
    const cells = async (g, p) => (await g.locator('tbody tr', { has: page.getByText(p, { exact: true }) }).locator('td').allInnerTexts()).join(' | ');
    const rows = {
      'added dir': [await cells(added, '/workspace/app/node_modules'), '/workspace/app/node_modules | directory | 5012 entries · 46 MiB'],
      'added file': [await cells(added, '/workspace/app/server.js'), '/workspace/app/server.js | file | 2.3 KiB'],
      'added link': [await cells(added, '/home/agent/.npmrc'), '/home/agent/.npmrc | link | —'],
      'changed file': [await cells(group('Changed').first(), '/workspace/app/package.json'), '/workspace/app/package.json | file | 812 B'],
      'changed dir': [await cells(group('Changed').first(), '/workspace/app'), '/workspace/app | directory | —'],
      'removed file': [await cells(group('Removed').first(), '/workspace/old-notes.txt'), '/workspace/old-notes.txt | file | 12 B'],
      'removed dir': [await cells(group('Removed').first(), '/home/agent/.cache/pip'), '/home/agent/.cache/pip | directory | 41 entries · 3.3 MiB'],
    };
    for (const [what, [got, want]] of Object.entries(rows)) check(got === want, `the ${what} row shows "${got}", not "${want}"`);
    const packages = async (name) => (await group(name).last().locator('tbody tr').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
    check(JSON.stringify(await packages('Installed')) === '["cowsay 3.03+dfsg2-8"]', `installed: ${JSON.stringify(await packages('Installed'))}`);
    check(JSON.stringify(await packages('Changed')) === '["curl 7.88.1-10 → 7.88.1-10+deb12u8"]', `changed: ${JSON.stringify(await packages('Changed'))}`);
    check(JSON.stringify(await packages('Removed')) === '["vim 2:9.0.1378-2"]', `removed: ${JSON.stringify(await packages('Removed'))}`);
    const toTop = (el) => el.scrollIntoView({ block: 'start' });  // clear of the sticky bar (scroll-margin-top)
    await diffPanel.evaluate(toTop);
    await shot(page, 'cp-13-diff');
    // The added list folded away: the rest of the answer in sight.
    await added.locator('summary').click();
    check(!(await added.evaluate((d) => d.open)), 'the Added group did not fold');
    await diffPanel.evaluate(toTop);
    await shot(page, 'cp-14-diff-folded');
  });

  await step('picking another checkpoint as the \'to\' side asks berthd with to=<its id>; Close puts the focus back', async () => {
    const to = diffPanel.getByLabel('Compared with');
    const options = await to.locator('option').allInnerTexts();
    check(options.length === 2 && options[0].startsWith('now') && options[1].startsWith(`${undoName} (`), `the 'to' choices: ${JSON.stringify(options)}`);
    const [req] = await Promise.all([page.waitForRequest((q) => isDiff(new URL(q.url()))), to.selectOption(undoId)]);
    const url = new URL(req.url());
    check(url.searchParams.get('to') === undoId && url.pathname.endsWith(`/checkpoints/${first.id}/diff`), `the diff request: ${url}`);
    await diffPanel.locator('.diffsum').filter({ hasText: `From before-upgrade to ${undoName}` }).waitFor();
    const again = await Promise.all([page.waitForRequest((q) => isDiff(new URL(q.url()))),
                                     diffPanel.getByRole('button', { name: 'Compare again' }).click()]);
    check(new URL(again[0].url()).searchParams.get('to') === undoId, `Compare again asked ${again[0].url()}`);
    await diffPanel.locator('.diffsum').waitFor();
    await diffPanel.getByRole('button', { name: 'Close' }).click();
    await diffPanel.waitFor({ state: 'detached' });
    const button = panel.locator('tr[data-checkpoint="before-upgrade"]').getByRole('button', { name: 'Diff' });
    check(await button.evaluate((b) => b === document.activeElement), 'the focus is not back on the Diff button');
    check(await button.getAttribute('aria-expanded') === 'false', 'a closed diff\'s button is expanded');
    await ctx.unroute(isDiff, answerDiff);
  });

  await step('publishing a template asks berthd for one from the workspace and shows its refusal', async () => {
    await api('POST', '/v1/workspaces/cp-demo/start');
    await pill.filter({ hasText: 'running' }).waitFor();
    await panel.getByRole('button', { name: 'Publish as template…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Publish as template' });
    await dialog.getByLabel('Template name').fill('node-dev');
    const r = await requestOf(page, isPost('/v1/templates'), () => dialog.getByRole('button', { name: 'Publish' }).click());
    check(JSON.stringify(r.body) === JSON.stringify({ name: 'node-dev', from: { workspace: wsId } }), `the publish request: ${JSON.stringify(r.body)}`);
    // The test driver cannot save a running domain's memory: berthd's refusal, shown in the dialog.
    check(r.status >= 400, `berthd made a template on the test driver (${r.status})`);
    await dialog.getByRole('alert').filter({ hasText: r.answer.error.message }).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
  });

  // From here on, /v1/templates is answered by the page's route: the template berthd would have
  // made of cp-demo's checkpoint. POST /v1/workspaces still goes to berthd.
  const standIn = [];
  await ctx.route('**/v1/templates**', async (route) => {
    const req = route.request();
    const url = new URL(req.url());
    if (req.method() === 'POST' && url.pathname === '/v1/templates') {
      const t = {
        id: 'tpl_00112233445566aa', name: req.postDataJSON().name, workspace_id: wsId, checkpoint_id: first.id,
        workspace: 'cp-demo', image: 'base', cpus: 1, memory_mib: 1024, disk_gib: 10, created_by: 'system',
        created_at: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      };
      standIn.push(t);
      return route.fulfill({ status: 201, contentType: 'application/json', body: JSON.stringify(t) });
    }
    if (req.method() === 'GET' && url.pathname === '/v1/templates') {
      return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ templates: standIn }) });
    }
    const name = decodeURIComponent(url.pathname.split('/').pop());
    const i = standIn.findIndex((t) => t.name === name);
    if (req.method() === 'DELETE' && i >= 0) {
      const [gone] = standIn.splice(i, 1);
      return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(gone) });
    }
    return route.continue();
  });

  await step('a published template is listed on the workspaces page and offered in the create dialog', async () => {
    await panel.getByRole('button', { name: 'Publish as template…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Publish as template' });
    await dialog.getByLabel('Template name').fill('node-dev');
    await dialog.getByRole('button', { name: 'Publish' }).click();
    await panel.getByRole('status').filter({ hasText: 'Published template node-dev' }).waitFor();
    await panel.locator(`tr[data-checkpoint="before-upgrade"]`).getByText('template node-dev').waitFor();

    await page.locator('nav.mainnav').getByRole('link', { name: 'Workspaces' }).click();
    const row = page.locator('tr[data-template="node-dev"]');
    await row.getByRole('link', { name: 'cp-demo' }).waitFor();
    await row.getByText('1 vCPU · 1024 MiB · 10 GiB disk').waitFor();
    await shot(page, 'cp-05-templates');

    await page.getByRole('button', { name: 'New workspace' }).first().click();
    const create = page.getByRole('dialog', { name: 'New workspace' });
    await create.getByLabel('a template').check();
    const select = create.locator('select[name="template"]');
    check(await select.inputValue() === 'node-dev', `the template select shows "${await select.inputValue()}"`);
    const options = await select.locator('option').allInnerTexts();
    check(JSON.stringify(options) === '["node-dev"]', `the template select offers ${JSON.stringify(options)}`);
    check(await create.locator('input[name="image"], select[name="size"]').count() === 0, 'the image or size field is offered with a template');
    await create.getByLabel('Name').fill('from-tpl');
    await shot(page, 'cp-06-create-from-template');
    // berthd does not have the stand-in: its 404 naming the template shows that it took the body
    // as a create from a template (any image or size field beside it would be a 400).
    const r = await requestOf(page, isPost('/v1/workspaces'), () => create.getByRole('button', { name: 'Create' }).click());
    check(JSON.stringify(r.body) === '{"name":"from-tpl","template":"node-dev"}', `the create request: ${JSON.stringify(r.body)}`);
    check(r.status === 404 && /no template 'node-dev'/.test(r.answer.error.message), `berthd answered ${r.status}: ${JSON.stringify(r.answer)}`);
    await create.getByRole('alert').filter({ hasText: "no template 'node-dev'" }).waitFor();
    await create.getByRole('button', { name: 'Cancel' }).click();
  });

  await step('a template deleted from the list asks first and leaves the list', async () => {
    const row = page.locator('tr[data-template="node-dev"]');
    await row.getByRole('button', { name: 'Delete' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete template node-dev?' });
    await confirm.getByText('those made from it go on').waitFor();
    const r = await requestOf(page, (q) => q.method() === 'DELETE', () => confirm.getByRole('button', { name: 'Delete template' }).click());
    check(r.status === 200 && standIn.length === 0, `the delete: ${r.status}`);
    await page.locator('.templates').getByText('No templates yet').waitFor();
    await ctx.unroute('**/v1/templates**');
  });

  // Templates built from a script, on berthd: it makes the build's workspace (a host agent here)
  // and runs the script through its agent, so a build that fails is real, end to end. One that
  // gets through would end at the checkpoint of its memory, which the test driver cannot take:
  // the page's route stands in for berthd to show a build that becomes ready.
  const templatesPanel = page.locator('.templates');
  const listGets = [];
  const countListGets = (r) => r.method() === 'GET' && new URL(r.url()).pathname === '/v1/templates' && listGets.push(Date.now());
  page.on('request', countListGets);

  await step('"New template from a script" posts the script form; berthd\'s 202 shows the template building', async () => {
    await templatesPanel.getByRole('button', { name: 'New template from a script' }).click();
    const dialog = page.getByRole('dialog', { name: 'New template from a script' });
    const name = dialog.getByLabel('Template name');
    check(await name.getAttribute('maxlength') === '48', 'the name field takes more than the 48 characters berthd allows a build');
    await name.fill('web-build');
    await dialog.getByLabel('Script').fill('echo building-web\nsleep 3\necho oops >&2\nexit 4');
    await dialog.getByLabel('Ready').fill('true');
    await dialog.getByLabel('Time limit (minutes)').fill('2');
    await shot(page, 'cp-08-template-script-dialog');
    const r = await requestOf(page, isPost('/v1/templates'), () => dialog.getByRole('button', { name: 'Build template' }).click());
    check(JSON.stringify(r.body) === JSON.stringify({ name: 'web-build', script: 'echo building-web\nsleep 3\necho oops >&2\nexit 4',
                                                      ready: 'true', image: 'base', size: 'small', timeout_s: 120 }),
          `the build request: ${JSON.stringify(r.body)}`);
    check(r.status === 202 && r.answer.state === 'building' && r.answer.workspace === 'template-web-build',
          `berthd answered ${r.status}: ${JSON.stringify(r.answer)}`);
    await dialog.waitFor({ state: 'hidden' });
    await templatesPanel.getByRole('status').filter({ hasText: 'Building template web-build in workspace template-web-build' }).waitFor();
    const row = templatesPanel.locator('tr[data-template="web-build"]');
    const pill = row.locator('.pill.t-building');
    await pill.getByText('building').waitFor();
    check(await pill.locator('.spinner').count() === 1, 'the building pill has no spinner');
    check(await row.getByRole('button', { name: 'New workspace' }).count() === 0, 'a building template offers a new workspace');
    check(await row.getByRole('button', { name: 'Delete' }).count() === 0, 'a building template offers Delete (berthd refuses it)');
    await row.scrollIntoViewIfNeeded();
    await shot(page, 'cp-09-template-building');
  });

  await step('the building template turns failed without a reload, with berthd\'s error and its build log', async () => {
    const navigations = [];
    const onNav = (f) => f === page.mainFrame() && navigations.push(f.url());
    page.on('framenavigated', onNav);
    const row = templatesPanel.locator('tr[data-template="web-build"]');
    await row.locator('.pill.t-failed').waitFor({ timeout: 60_000 });
    page.off('framenavigated', onNav);
    check(navigations.length === 0, `the page navigated: ${navigations.join(', ')}`);
    check(listGets.length >= 2, `the list was asked ${listGets.length} times while the build ran`);
    const got = await api('GET', '/v1/templates/web-build');
    check(got.body.state === 'failed' && got.body.error === 'the script exited with 4', `berthd has ${JSON.stringify(got.body)}`);
    await row.locator('.errtext').getByText('the script exited with 4').waitFor();
    // The note that said it was building says how it ended.
    await templatesPanel.getByRole('status').filter({ hasText: 'Template web-build failed to build: the script exited with 4.' }).waitFor();
    check(await templatesPanel.getByRole('status').filter({ hasText: 'Building template web-build' }).count() === 0,
          'the note still says the template is building');
    const log = await requestOf(page, (q) => q.method() === 'GET' && new URL(q.url()).pathname === `/v1/templates/${got.body.id}`,
                                () => row.getByText('Script and build log').click());
    check(log.status === 200 && log.answer.build_log === 'building-web\noops\n', `the log's GET: ${log.status} ${JSON.stringify(log.answer)}`);
    const pre = row.locator('details.buildlog pre.log');
    await pre.waitFor();
    check(await pre.textContent() === 'building-web\noops\n', `the log shows "${await pre.textContent()}"`);
    check(await row.locator('details.buildlog pre.script').textContent() === 'echo building-web\nsleep 3\necho oops >&2\nexit 4',
          'the script is not shown as sent');
    await row.getByRole('button', { name: 'Delete' }).waitFor();
    check(await row.getByRole('button', { name: 'New workspace' }).count() === 0, 'a failed template offers a new workspace');
    await pre.scrollIntoViewIfNeeded();
    await shot(page, 'cp-10-template-failed');
    await page.setViewportSize(kViewports.phone);  // the row as a card, the log inside it
    await pre.scrollIntoViewIfNeeded();
    await shot(page, 'cp-10-template-failed');
    await page.setViewportSize(kViewports.laptop);
  });

  await step('the list is asked no more once no template is building', async () => {
    // Two polls' worth of quiet (kBuildPollMs is 2 s): a poll still running would ask twice.
    const before = listGets.length;
    await page.waitForTimeout(5000);
    check(listGets.length === before, `the list was asked ${listGets.length - before} times with nothing building`);
  });

  await step('the create dialog offers no failed template', async () => {
    await page.getByRole('button', { name: 'New workspace' }).first().click();
    const create = page.getByRole('dialog', { name: 'New workspace' });
    const radio = create.getByLabel('a template');
    await create.getByText('a template (none yet)').waitFor();
    check(await radio.isDisabled(), 'the template choice is enabled with only a failed template');
    await create.getByRole('button', { name: 'Cancel' }).click();
  });

  await step('the script dialog shows berthd\'s refusal (a desktop image that is not built) and makes nothing', async () => {
    await templatesPanel.getByRole('button', { name: 'New template from a script' }).click();
    const dialog = page.getByRole('dialog', { name: 'New template from a script' });
    await dialog.getByLabel('Template name').fill('web-desk');
    await dialog.getByLabel('Script').fill('true');
    await dialog.getByLabel('Image').selectOption('desktop');
    await dialog.getByLabel('Size').selectOption('medium');
    const r = await requestOf(page, isPost('/v1/templates'), () => dialog.getByRole('button', { name: 'Build template' }).click());
    check(JSON.stringify(r.body) === '{"name":"web-desk","script":"true","image":"desktop","size":"medium"}', `the request: ${JSON.stringify(r.body)}`);
    check(r.status === 409 && /image 'desktop' is not built/.test(r.answer.error.message), `berthd answered ${r.status}: ${JSON.stringify(r.answer)}`);
    await dialog.getByRole('alert').filter({ hasText: r.answer.error.message }).waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    const names = (await api('GET', '/v1/templates')).body.templates.map((t) => t.name);
    check(JSON.stringify(names) === '["web-build"]', `berthd lists ${JSON.stringify(names)}`);
  });

  await step('a failed template deleted from the list leaves berthd and the list', async () => {
    const row = templatesPanel.locator('tr[data-template="web-build"]');
    await row.getByRole('button', { name: 'Delete' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete template web-build?' });
    const r = await requestOf(page, (q) => q.method() === 'DELETE', () => confirm.getByRole('button', { name: 'Delete template' }).click());
    check(r.status === 200 && r.answer.name === 'web-build', `the delete: ${r.status} ${JSON.stringify(r.answer)}`);
    await templatesPanel.getByText('No templates yet').waitFor();
    check((await api('GET', '/v1/templates/web-build')).status === 404, 'berthd still has web-build');
  });

  // From here on, /v1/templates is the page's route again: a build berthd's test driver cannot
  // finish, building until the test says it is ready.
  const built = {
    id: 'tpl_00112233445566bb', name: 'web-ready', workspace_id: 'ws_00112233445566bb', checkpoint_id: '',
    workspace: 'template-web-ready', image: 'base', cpus: 1, memory_mib: 1024, disk_gib: 10, created_by: 'system',
    created_at: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'), state: 'building', script: 'npm ci', ready: 'true', timeout_s: 1800,
  };
  await ctx.route('**/v1/templates**', (route) => {
    const url = new URL(route.request().url());
    const body = url.pathname === '/v1/templates' ? { templates: [built] } : { ...built, build_log: 'added 1 package\n' };
    return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(body) });
  });

  await step('a building template that becomes ready is shown ready without a reload and offered for a new workspace', async () => {
    await templatesPanel.getByRole('button', { name: 'Refresh' }).click();
    const row = templatesPanel.locator('tr[data-template="web-ready"]');
    await row.locator('.pill.t-building').waitFor();
    const before = listGets.length;
    Object.assign(built, { state: 'ready', checkpoint_id: 'cp_00112233445566bb' });
    await row.locator('.pill.t-ready').waitFor({ timeout: 10_000 });
    check(listGets.length === before + 1, `${listGets.length - before} polls to see it ready`);
    await row.getByRole('button', { name: 'New workspace' }).click();
    const create = page.getByRole('dialog', { name: 'New workspace' });
    check(await create.locator('select[name="template"]').inputValue() === 'web-ready', 'the ready template is not chosen');
    await create.getByRole('button', { name: 'Cancel' }).click();
    await ctx.unroute('**/v1/templates**');
    page.off('request', countListGets);
  });

  // Phone width: the panel's table as cards.
  const phone = await browser.newContext({ viewport: kViewports.phone });
  const pp = await phone.newPage();
  pp.setDefaultTimeout(kStep);
  watchPage(pp, problems);
  await signIn(pp, base, berthd.key);
  await pp.goto(`${base}/w/cp-demo/checkpoints`);
  await pp.locator('tr[data-checkpoint="before-upgrade"]').waitFor();
  // The tabs scroll sideways at this width: the current one, the last, is scrolled into sight.
  const tabBox = await pp.locator('nav.tabs a[aria-current="page"]').boundingBox();
  check(tabBox && tabBox.x >= 0 && tabBox.x + tabBox.width <= kViewports.phone.width, `the Checkpoints tab is out of sight: ${JSON.stringify(tabBox)}`);
  await shot(pp, 'cp-07-panel');
  // The diff panel at phone width, a guest's answer from the page's route.
  await phone.route(isDiff, (route) => route.fulfill({ status: 200, contentType: 'application/json',
                                                       body: JSON.stringify(cannedDiff(first.id, 'current')) }));
  await pp.locator('tr[data-checkpoint="before-upgrade"]').getByRole('button', { name: 'Diff' }).click();
  await pp.locator('section.diff .diffsum').waitFor();
  await pp.locator('section.diff').evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await shot(pp, 'cp-13-diff');
  await phone.close();

  await ctx.close();

  check(problems.length === 0, `the pages reported:\n${problems.join('\n')}`);
  check(a11y.length === 0, `axe-core found serious or critical violations:\n${a11y.join('\n')}`);
}

// The forks go first: while they stand on cp-demo's checkpoint, cp-demo cannot be deleted (the
// harness deletes every workspace once, in any order).
async function deleteForks(api) {
  const forks = () => api('GET', '/v1/workspaces').then((r) => (r.body.workspaces ?? []).filter((w) => w.forked_from));
  for (const w of await forks()) await api('DELETE', `/v1/workspaces/${w.id}`);
  await waitFor('the forks to be deleted', async () => (await forks()).length === 0, 30_000);
}

async function main() {
  const dist = path.join(root, 'web', 'dist');
  if (!fs.existsSync(path.join(dist, 'index.html'))) {
    console.log(`FAIL ${T}: ${dist}/index.html is missing: build it (scripts/setup, or npm run build in web/)`);
    return 1;
  }
  const berthd = await startBerthd({ config: { web_root: dist } });
  let browser = null;
  try {
    browser = await launchChromium();
    const started = Date.now();
    await run(browser, berthd, berthd.url);
    console.log(`PASS ${T} (${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${opts.screenshots})`);
    return 0;
  } catch (e) {
    console.log(`FAIL ${T}: ${e instanceof Failure ? e.message : e.stack}`);
    try {
      log(`berthd's log (tail):\n${fs.readFileSync(berthd.logFile, 'utf8').split('\n').slice(-40).join('\n')}`);
    } catch {}
    return 1;
  } finally {
    if (browser) await browser.close().catch(() => {});
    await deleteForks(berthd.api).catch((e) => log(`cleanup: ${e.message}`));
    await berthd.stop();
  }
}

process.exitCode = await main();
