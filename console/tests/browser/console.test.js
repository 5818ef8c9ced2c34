// The console end to end in Debian's chromium against a real dev cluster (docs/console.md,
// "Browser tests"); run by tests/console/browser_test.sh, which starts `yard-master --dev`.
//
//   YARD_URL=https://HOST:PORT YARD_TOKEN=... node console/tests/browser/console.test.js
//
// SCREENSHOT_DIR=dir saves the main pages there (1280x800); FAIL_DIR=dir gets a screenshot
// and the page's HTML when a step fails. Exits 0 when every step passed.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { login, mouseDrag, openBrowser, waitContains, waitText, watchPage } from './lib.js';

const url = process.env.YARD_URL;
const token = process.env.YARD_TOKEN;
if (!url || !token) {
  console.error('usage: YARD_URL=https://HOST:PORT YARD_TOKEN=TOKEN node console.test.js');
  process.exit(2);
}
const shotDir = process.env.SCREENSHOT_DIR;
const failDir = process.env.FAIL_DIR;

const JOB = 'browser-dag';
const FAILING = 'browser-fail';
const RUNNING = 'browser-run';
const HELD = 'browser-held';
const PREP = 'browser-prep';
const AFTER = 'browser-after';
const SKIP = 'browser-skip';
const TASKS = ['step-a', 'step-b', 'step-c'];

const t0 = Date.now();
const log = (s) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${s}`);

const { browser, context } = await openBrowser();
const page = await context.newPage();
watchPage(page, log);
const tid = (id) => page.getByTestId(id);

async function shot(name) {
  if (!shotDir) return;
  await page.mouse.move(0, 799); // no hover highlight in the picture
  await page.screenshot({ path: path.join(shotDir, `${name}.png`) });
  log(`screenshot ${name}.png`);
}

// Waits until the Create page's validation settled on `state` (valid or invalid).
async function validation(state) {
  await page
    .waitForFunction((want) => document.querySelector('[data-testid="validation-status"]')?.getAttribute('data-state') === want, state, {
      timeout: 15000,
      polling: 50,
    })
    .catch(async () => {
      throw new Error(`validation-status: wanted ${state}, it shows "${await tid('validation-status').textContent()}"`);
    });
}

// The dependency edge source -> target: its path ends in an arrowhead (an SVG marker that
// exists in the page), and that end is on the top of the dependent task's box.
async function checkArrow(source, target) {
  const got = await page.evaluate(
    ([source, target]) => {
      const edge = document.querySelector(`[data-testid="rf__edge-${CSS.escape(`${source}->${target}`)}"] path.react-flow__edge-path`);
      if (!edge) return { error: 'no such edge' };
      const ref = /url\(['"]?#(.+?)['"]?\)/.exec(edge.getAttribute('marker-end') ?? '');
      const marker = ref && document.getElementById(ref[1]);
      if (!marker || marker.tagName.toLowerCase() !== 'marker') return { error: `marker-end is "${edge.getAttribute('marker-end')}", no marker it names` };
      if (!marker.querySelector('polyline, path, polygon')) return { error: 'the marker draws nothing' };
      const end = edge.getPointAtLength(edge.getTotalLength()).matrixTransform(edge.getScreenCTM());
      const box = (name) => document.querySelector(`[data-testid="task-node-${CSS.escape(name)}"]`).getBoundingClientRect();
      const to = box(target);
      const from = box(source);
      return { end: { x: end.x, y: end.y }, to: { left: to.left, right: to.right, top: to.top }, fromBottom: from.bottom };
    },
    [source, target],
  );
  const where = JSON.stringify(got);
  assert.ok(!got.error, `${source} -> ${target}: ${got.error}`);
  assert.ok(got.end.x >= got.to.left && got.end.x <= got.to.right && Math.abs(got.end.y - got.to.top) <= 8, `the arrow ends on ${target}'s top: ${where}`);
  assert.ok(got.end.y - got.fromBottom > 10, `the arrow points away from ${source}: ${where}`);
}

// Waits until every one of `count` task boxes lies inside the graph area and the task panel
// is beside it, not over it.
async function waitAllTasksInView(count) {
  const inView = () =>
    page.evaluate((count) => {
      const dag = document.querySelector('[data-testid="job-dag"]').getBoundingClientRect();
      const panel = document.querySelector('[data-testid="task-panel"]')?.getBoundingClientRect();
      const boxes = [...document.querySelectorAll('[data-testid="job-dag"] [data-testid^="task-node-"]')].map((n) => ({
        name: n.getAttribute('data-testid'),
        ...JSON.parse(JSON.stringify(n.getBoundingClientRect())),
      }));
      const inside = (b) => b.left >= dag.left - 0.5 && b.right <= dag.right + 0.5 && b.top >= dag.top - 0.5 && b.bottom <= dag.bottom + 0.5;
      const ok = boxes.length === count && boxes.every(inside) && (!panel || panel.left >= dag.right - 0.5);
      return { ok, dag: JSON.parse(JSON.stringify(dag)), panel: panel && JSON.parse(JSON.stringify(panel)), boxes };
    }, count);
  const deadline = Date.now() + 5000;
  let last;
  while (Date.now() < deadline) {
    last = await inView();
    if (last.ok) return;
    await page.waitForTimeout(100);
  }
  const rect = (r) => `${Math.round(r.left)}..${Math.round(r.right)} x ${Math.round(r.top)}..${Math.round(r.bottom)}`;
  throw new Error(
    `not every task box is inside the graph area ${rect(last.dag)}` +
      (last.panel ? ` (panel ${rect(last.panel)})` : '') +
      `: ${last.boxes.length} of ${count} drawn: ${last.boxes.map((b) => `${b.name} ${rect(b)}`).join('; ')}`,
  );
}

// Submits a job spec through the API with the page's session (as the Create page does).
async function submitSpec(spec) {
  const r = await page.evaluate(async (spec) => {
    const res = await fetch('/api/v1/jobs', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Yard-Console': '1' },
      body: JSON.stringify(spec),
    });
    return { status: res.status, text: await res.text() };
  }, spec);
  assert.ok(r.status >= 200 && r.status < 300, `submit ${spec.name}: HTTP ${r.status} ${r.text}`);
}

// POST /api/v1/jobs/NAME/ACTION with the page's session.
async function jobAction(name, action) {
  const r = await page.evaluate(
    async ([name, action]) => {
      const res = await fetch(`/api/v1/jobs/${encodeURIComponent(name)}/${action}`, { method: 'POST', headers: { 'X-Yard-Console': '1' } });
      return { status: res.status, text: await res.text() };
    },
    [name, action],
  );
  assert.ok(r.status >= 200 && r.status < 300, `${action} ${name}: HTTP ${r.status} ${r.text}`);
}

// A one-task container job's spec.
const oneTask = (name, command, extra = {}) => ({
  name,
  ...extra,
  tasks: [{ name: 'work', kind: 'container-job', container: { image: 'host', resources: { cpu: '100m', memory: '32Mi' }, command } }],
});

// Waits until the element's title attribute contains `text` (a task box's reason is its title).
async function waitTitle(testid, text, timeout = 15000) {
  await page
    .waitForFunction(([id, want]) => (document.querySelector(`[data-testid="${CSS.escape(id)}"]`)?.getAttribute('title') ?? '').includes(want), [testid, text], {
      timeout,
      polling: 50,
    })
    .catch(async () => {
      throw new Error(`${testid}: wanted its title to contain "${text}", it is "${await tid(testid).getAttribute('title').catch(() => '(none)')}"`);
    });
}

// Opens a job's page from the Jobs list.
async function openJob(name) {
  await tid('nav-jobs').click();
  await tid(`job-link-${name}`).click();
  await page.waitForURL(`**/jobs/${name}`, { timeout: 10000 });
  await waitText(page, 'job-name', name, 5000);
}

async function step(name, fn) {
  log(name);
  await fn();
}

try {
  await step('login: a wrong token is refused, the admin token accepted', async () => {
    await page.goto(url + '/jobs');
    await tid('login-token').waitFor();
    await shot('login');
    await tid('login-token').fill('not-a-token');
    await tid('login-submit').click();
    await waitContains(page, 'login-error', 'not valid');
    await tid('login-token').fill(token);
    await tid('login-submit').click();
    await waitContains(page, 'whoami', 'admin');
    await tid('jobs-table').waitFor();
  });

  await step('create: drag three Container-Job kinds from the palette onto the canvas', async () => {
    await tid('nav-create').click();
    await tid('canvas').waitFor();
    for (const [i, y] of [120, 300, 480].entries()) {
      await mouseDrag(page, tid('palette-container-job'), tid('canvas'), { x: 260, y });
      await tid(`task-node-container-job-${i + 1}`).waitFor({ timeout: 5000 });
    }
    assert.equal(await page.locator('.react-flow__node').count(), 3, 'three task nodes on the canvas');
  });

  await step('create: connect 1 -> 2 and 2 -> 3 by dragging between handles', async () => {
    await mouseDrag(page, tid('handle-out-container-job-1'), tid('handle-in-container-job-2'));
    await mouseDrag(page, tid('handle-out-container-job-2'), tid('handle-in-container-job-3'));
    await page.waitForFunction(() => document.querySelectorAll('.react-flow__edge').length === 2, null, { timeout: 5000 });
  });

  await step('create: 3 -> 1 would close a cycle and is refused on the spot', async () => {
    await mouseDrag(page, tid('handle-out-container-job-3'), tid('handle-in-container-job-1'));
    await waitContains(page, 'canvas-message', 'cycle', 5000);
    const msg = (await tid('canvas-message').textContent()).trim();
    assert.match(msg, /container-job-1 → container-job-2 → container-job-3 → container-job-1/, `the cycle spelled out: ${msg}`);
    assert.equal(await page.locator('.react-flow__edge').count(), 2, 'no third edge after the refused one');
  });

  await step("create: fill each task's form (name, image, command, resources)", async () => {
    for (const [i, name] of TASKS.entries()) {
      const b = `tasks[${i}]`;
      // each node still has its dropped name until its form renames it
      await tid(`task-node-container-job-${i + 1}`).click();
      await tid(`task-form-${i}`).waitFor();
      await tid(`field-${b}.name`).fill(name);
      await tid(`task-node-${name}`).waitFor();
      await tid(`field-${b}.container.image`).fill('host');
      await tid(`words-mode-${b}.container.command`).click(); // the default command is a list
      await tid(`field-${b}.container.command`).fill(`sh -c 'echo hello-from-${name.slice(-1)}'`);
      await tid(`field-${b}.container.resources.cpu`).fill('100m');
      await tid(`field-${b}.container.resources.memory`).fill('32Mi');
    }
    // the renames carried the dependencies along
    await tid('task-node-step-c').click();
    await tid('dep-step-c-step-b').waitFor();
    await tid('task-node-step-b').click();
    await tid('dep-step-b-step-a').waitFor();
  });

  await step('create: set the job name', async () => {
    await page.locator('.react-flow__pane').click({ position: { x: 40, y: 40 } });
    await tid('job-form').waitFor();
    await tid('field-name').fill(JOB);
    await validation('valid');
  });

  await step('create: runs-after takes JOB[:condition] and a bad condition shows its error at the field', async () => {
    await tid('field-after').fill('prep-data:sometimes');
    await validation('invalid');
    const err = page.locator('[data-testid^="error-after"]').first();
    await err.waitFor();
    log(`  error at the field: ${(await err.textContent()).trim()}`);
    assert.match(await err.textContent(), /sometimes/, 'the error names the value');
    await tid('field-after').fill('');
    await validation('valid');
    assert.equal(await tid('field-hold').isChecked(), false, 'not held by default');
  });

  await step('create: a bad cpu shows its error at the field and on the task node, and fixing it clears both', async () => {
    await tid('task-node-step-b').click();
    await tid('field-tasks[1].container.resources.cpu').fill('lots');
    await validation('invalid');
    const err = tid('error-tasks[1].container.resources.cpu');
    await err.waitFor();
    log(`  error at the field: ${(await err.textContent()).trim()}`);
    assert.match(await err.textContent(), /lots/, 'the error names the value');
    await waitText(page, 'task-errors-step-b', '1 error', 5000);
    assert.equal(await tid('task-errors-step-a').count(), 0, 'step-a has no error badge');
    await shot('create-error');
    await tid('field-tasks[1].container.resources.cpu').fill('100m');
    await validation('valid');
    assert.equal(await err.count(), 0, 'the error is gone from the field');
    assert.equal(await tid('task-errors-step-b').count(), 0, 'the badge is gone from the node');
    await tid('task-node-step-a').click();
    await shot('create');
  });

  await step('create: a task topology level that is not a label key shows its error at the field', async () => {
    await tid('task-node-step-a').click();
    await tid('field-tasks[0].topology.mode').selectOption('required');
    await tid('field-tasks[0].topology.level').fill('a rack');
    await validation('invalid');
    const err = page.locator('[data-testid^="error-tasks[0].topology"]').first();
    await err.waitFor();
    log(`  error at the field: ${(await err.textContent()).trim()}`);
    assert.match(await err.textContent(), /a rack/, 'the error names the value');
    await tid('field-tasks[0].topology.mode').selectOption('');
    await validation('valid');
    assert.equal(await tid('field-tasks[0].topology.level').count(), 0, 'no level without a mode');
  });

  await step('submit; every task becomes Succeeded on the canvas', async () => {
    await tid('submit-job').click();
    await page.waitForURL(`**/jobs/${JOB}`, { timeout: 10000 });
    await tid('job-dag').waitFor();
    for (const name of TASKS) {
      await waitText(page, `task-state-${name}`, 'Succeeded', 60000);
      assert.equal(await tid(`task-node-${name}`).getAttribute('data-state'), 'Succeeded');
    }
    await waitText(page, 'job-state', 'Succeeded', 15000);
    await waitText(page, 'job-tasks', 'tasks 3: 3 succeeded', 15000);
  });

  await step("the job's edges end in arrowheads at the task that runs after; each box shows its runs done", async () => {
    await checkArrow('step-a', 'step-b');
    await checkArrow('step-b', 'step-c');
    for (const name of TASKS) await waitText(page, `task-progress-${name}`, '1/1 runs', 5000);
  });

  await step("a task's logs show its output", async () => {
    await tid('task-node-step-b').click();
    await tid('task-panel').waitFor();
    await waitText(page, 'panel-state', 'Succeeded', 5000);
    await tid('tab-logs').click();
    await waitContains(page, 'logs-view', 'hello-from-b', 15000);
    const logs = await tid('logs-view').textContent();
    assert.ok(!logs.includes('hello-from-a') && !logs.includes('hello-from-c'), `step-b's logs only: ${logs}`);
    await shot('job');
  });

  await step('a failing task shows Failed and its reason; the task after it is Skipped', async () => {
    const ok = (name, extra = []) => [
      `  - name: ${name}`,
      '    kind: container-job',
      ...extra,
      '    container:',
      '      image: host',
      '      resources: { cpu: 100m, memory: 32Mi }',
      `      command: [sh, -c, "echo ${name}"]`,
    ];
    await tid('nav-create').click();
    await tid('import-open').click();
    await tid('import-text').fill(
      [
        `name: ${FAILING}`,
        'tasks:',
        '  - name: boom',
        '    kind: container-job',
        '    container:',
        '      image: host',
        '      resources: { cpu: 100m, memory: 32Mi }',
        `      command: [sh, -c, "echo boom >&2; exit 3"]`,
        '  - name: after',
        '    kind: container-job',
        '    dependsOn: [boom]',
        '    container:',
        '      image: host',
        '      resources: { cpu: 100m, memory: 32Mi }',
        '      command: [sh, -c, "echo never"]',
        // three tasks that succeed beside it, one of three runs: a wide graph
        ...ok('side-1'),
        ...ok('side-2'),
        ...ok('batch', ['    completions: 3', '    parallelism: 2']),
        '',
      ].join('\n'),
    );
    await tid('import-apply').click();
    await tid('task-node-boom').waitFor();
    await tid('task-node-after').waitFor();
    await validation('valid');
    await tid('submit-job').click();
    await page.waitForURL(`**/jobs/${FAILING}`, { timeout: 10000 });
    await waitText(page, 'task-state-boom', 'Failed', 60000);
    await waitText(page, 'task-state-after', 'Skipped', 30000);
    await waitText(page, 'job-state', 'Failed', 15000);
    // the box: the failed run's exit code and the master's reason, its runs and the others'
    await waitText(page, 'task-exit-boom', 'exit 3', 10000);
    await waitContains(page, 'task-reason-boom', 'run failed', 10000);
    log(`  boom's box: ${(await tid('task-node-boom').textContent()).trim()}`);
    await waitText(page, 'task-progress-boom', '0/1 runs', 5000);
    await waitText(page, 'task-progress-batch', '3/3 runs', 5000);
    await waitText(page, 'task-progress-side-1', '1/1 runs', 5000);
    assert.equal(await tid('task-failure-after').count(), 0, 'a skipped task shows no failure');
    // the header counts the tasks by how they ended
    await waitText(page, 'job-tasks', 'tasks 5: 3 succeeded, 1 failed, 1 skipped', 10000);
    await checkArrow('boom', 'after');
    await tid('task-node-boom').click();
    await waitText(page, 'panel-state', 'Failed', 5000);
    // the panel opens beside the graph, which is fitted to what is left of it
    await waitAllTasksInView(5);
    // the master's reason on the task, the exit code on its replica, the cause on the job
    await waitContains(page, 'reason-boom', 'run failed', 10000);
    log(`  reason: ${(await tid('reason-boom').textContent()).trim()}`);
    const replica = tid('replica-run-0-0');
    await waitContains(page, 'replica-run-0-0', 'Exited', 10000);
    assert.equal((await replica.locator('td').nth(5).textContent()).trim(), '3', 'the replica exited with code 3');
    await waitContains(page, 'job-reason', 'task boom failed', 5000);
    await tid('tab-logs').click();
    await waitContains(page, 'logs-view', 'boom', 15000);
    await shot('job-failed');
    // closed, the graph has the whole width again and is fitted to it
    await tid('task-panel-close').click();
    await waitAllTasksInView(5);
  });

  await step("running tasks: replicas running, an elastic task's workers, its panel's rows; cancel", async () => {
    const container = [
      '        container:',
      '          image: host',
      '          resources: { cpu: 100m, memory: 32Mi }',
      '          command: [sleep, "300"]',
    ];
    await tid('nav-create').click();
    await tid('import-open').click();
    await tid('import-text').fill(
      [
        `name: ${RUNNING}`,
        'tasks:',
        '  - name: train',
        '    kind: pytorch',
        '    mode: master-worker',
        '    roles:',
        '      master:',
        '        replicas: 1',
        ...container,
        '      worker:',
        '        replicas: 2',
        ...container,
        '  - name: grow',
        '    kind: pytorch',
        '    mode: elastic',
        '    elastic: { backend: c10d, metric: cpu, target: 80, minReplicas: 1, maxReplicas: 3 }',
        '    roles:',
        '      worker:',
        ...container,
        '',
      ].join('\n'),
    );
    await tid('import-apply').click();
    await tid('task-node-grow').waitFor();
    await validation('valid');
    await tid('submit-job').click();
    await page.waitForURL(`**/jobs/${RUNNING}`, { timeout: 10000 });
    await waitText(page, 'task-state-train', 'Running', 30000);
    await waitText(page, 'task-state-grow', 'Running', 30000);
    await waitText(page, 'task-progress-train', '3/3 running', 10000);
    await waitText(page, 'task-progress-grow', '1 of 1–3 workers', 10000);
    await waitText(page, 'job-tasks', 'tasks 2: 2 running', 10000);
    await tid('task-node-grow').click();
    await waitText(page, 'panel-state', 'Running', 5000);
    await waitContains(page, 'elastic-workers', '1 now', 10000);
    // the elastic rows are rows of the panel's one label/value grid: label beside value, the
    // labels in one column and the values in another
    const rows = await page.evaluate(() => {
      const grid = document.querySelector('[data-testid="task-facts"]');
      if (!grid) return { error: 'no task-facts grid in the panel' };
      const row = (label) => {
        const dt = [...grid.querySelectorAll(':scope > dt')].find((d) => d.textContent.trim() === label);
        const dd = dt?.nextElementSibling;
        if (!dt || dd?.tagName !== 'DD') return null;
        const a = dt.getBoundingClientRect();
        const b = dd.getBoundingClientRect();
        return { label, dtLeft: a.left, dtRight: a.right, ddLeft: b.left, top: a.top, ddTop: b.top, dd: dd.getAttribute('data-testid') };
      };
      return { rows: ['State', 'Reason', 'Workers', 'Autoscaling'].map(row) };
    });
    assert.ok(!rows.error, rows.error);
    const [state, ...others] = rows.rows;
    assert.ok(state && others.every(Boolean), `every row is a label and its value in the grid: ${JSON.stringify(rows)}`);
    for (const r of others) {
      assert.ok(Math.abs(r.dtLeft - state.dtLeft) < 1 && Math.abs(r.ddLeft - state.ddLeft) < 1, `"${r.label}" lines up with "State": ${JSON.stringify(rows)}`);
      assert.ok(r.ddLeft > r.dtRight && Math.abs(r.ddTop - r.top) < 8, `"${r.label}"'s value is beside it: ${JSON.stringify(r)}`);
    }
    assert.equal(rows.rows[2].dd, 'elastic-workers');
    await waitAllTasksInView(2);
    await shot('job-running');
    await tid('job-cancel').click();
    await tid('confirm-ok').click();
    await waitText(page, 'job-state', 'Cancelled', 30000);
    await waitText(page, 'job-tasks', 'tasks 2: 2 cancelled', 10000);
    await waitText(page, 'task-progress-train', '3 replicas', 10000);
  });

  await step('a job submitted held shows Held (by whom) on the Jobs page and its page; Release runs it', async () => {
    await submitSpec(oneTask(HELD, ['sh', '-c', 'sleep 2; echo held-ran'], { hold: true }));
    await tid('nav-jobs').click();
    await waitText(page, `job-flags-${HELD}-held`, 'Held by admin', 10000);
    await waitText(page, `job-state-${HELD}`, 'Queued', 5000);
    await openJob(HELD);
    await waitText(page, 'job-state', 'Queued', 5000);
    await waitText(page, 'job-flags-held', 'Held by admin', 5000);
    await waitTitle('task-node-work', 'held by admin');
    assert.equal(await tid('job-hold').count(), 0, 'no Hold on a held job');
    assert.equal(await tid('job-requeue').count(), 0, 'no Requeue on a queued job');
    await tid('job-release').click();
    await tid('confirm-ok').click();
    await waitText(page, 'job-state', 'Succeeded', 60000);
    assert.equal(await tid('job-flags-held').count(), 0, 'the Held badge is gone');
    assert.equal(await tid('job-release').count(), 0, 'no Release once released');
  });

  await step('Requeue on a finished job: it runs again, "requeued 1×", and ends Succeeded again', async () => {
    assert.equal(await tid('job-requeues').count(), 0, 'never requeued yet');
    await tid('job-requeue').click();
    await tid('confirm-ok').click();
    await waitText(page, 'job-requeues', 'requeued 1×', 15000);
    // back from Succeeded to Queued or Running (its task sleeps 2 s), then Succeeded again
    await page
      .waitForFunction(() => ['Queued', 'Running'].includes(document.querySelector('[data-testid="job-state"]')?.textContent?.trim()), null, {
        timeout: 15000,
        polling: 50,
      })
      .catch(async () => {
        throw new Error(`job-state: wanted Queued or Running after the requeue, it shows "${await tid('job-state').textContent()}"`);
      });
    await waitText(page, 'job-state', 'Succeeded', 60000);
    await waitText(page, 'job-requeues', 'requeued 1×', 5000);
  });

  await step('a job after a running job shows "after ..." and ends Skipped once that job is cancelled', async () => {
    await submitSpec(oneTask(PREP, ['sleep', '300']));
    await submitSpec(oneTask(AFTER, ['sh', '-c', 'echo after-ran'], { after: [{ job: PREP, condition: 'succeeded' }] }));
    await tid('nav-jobs').click();
    await waitText(page, `job-flags-${AFTER}-after`, `after ${PREP}`, 10000);
    await openJob(AFTER);
    await waitText(page, 'job-state', 'Queued', 5000);
    await waitText(page, 'job-flags-after', `after ${PREP}`, 5000);
    await waitTitle('task-node-work', `after ${PREP}`);
    await tid('job-hold').waitFor({ timeout: 5000 }); // a queued job not held may be held
    await jobAction(PREP, 'cancel');
    await waitText(page, 'job-state', 'Skipped', 30000);
    assert.equal(await tid('job-flags-after').count(), 0, 'no "after" once Skipped');
    assert.ok(await tid('job-cancel').isDisabled(), 'a Skipped job cannot be cancelled: it is final');
    assert.equal(await tid('job-requeue').count(), 0, 'no Requeue on a Skipped job');
  });

  await step('a job after a job that succeeded, with condition failed, is Skipped; the filter finds it', async () => {
    await submitSpec(oneTask(SKIP, ['sh', '-c', 'echo never'], { after: [{ job: JOB, condition: 'failed' }] }));
    await tid('nav-jobs').click();
    await waitText(page, `job-state-${SKIP}`, 'Skipped', 30000);
    await tid('filter-state').selectOption('Skipped');
    await tid(`job-row-${SKIP}`).waitFor({ timeout: 10000 });
    await tid(`job-row-${AFTER}`).waitFor({ timeout: 10000 });
    await waitText(page, 'page-info', '1–2 of 2', 10000);
    await tid('filter-state').selectOption('');
    await openJob(SKIP);
    await waitText(page, 'job-state', 'Skipped', 10000);
    assert.equal(await tid('job-state').getAttribute('data-state'), 'Skipped');
  });

  await step('the Jobs page lists both jobs with their states', async () => {
    await tid('nav-jobs').click();
    await tid('jobs-table').waitFor();
    await waitContains(page, `job-state-${JOB}`, 'Succeeded', 10000);
    await waitContains(page, `job-state-${FAILING}`, 'Failed', 10000);
    await waitText(page, `job-tasks-${JOB}`, '3/3', 5000);
    await shot('jobs');
  });

  await step('the Queues, Nodes and Datasets pages show the dev cluster', async () => {
    await tid('nav-queues').click();
    await waitText(page, 'queue-state-default', 'running', 10000);
    await shot('queues');
    await tid('nav-nodes').click();
    await waitContains(page, 'node-state-dev', 'ready', 10000);
    await waitContains(page, 'node-row-dev', 'host', 5000); // its driver
    await shot('nodes');
    await tid('nav-datasets').click();
    await tid('datasets-table').waitFor();
    if (process.env.DATASET) await waitContains(page, `dataset-row-${process.env.DATASET}`, process.env.DATASET, 10000);
    await shot('datasets');
  });

  log('all steps passed');
  await browser.close();
} catch (e) {
  console.error(`FAILED: ${e.stack ?? e}`);
  if (failDir) {
    fs.mkdirSync(failDir, { recursive: true });
    await page.screenshot({ path: path.join(failDir, 'failed.png') }).catch(() => {});
    fs.writeFileSync(path.join(failDir, 'failed.html'), await page.content().catch(() => ''));
    console.error(`the page at the failure: ${failDir}/failed.png, failed.html (${page.url()})`);
  }
  await browser.close();
  process.exit(1);
}
