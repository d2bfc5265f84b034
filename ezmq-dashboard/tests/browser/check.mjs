// Drives the dashboard at BASE in Debian's headless Chromium, as a user
// would: the overview lists TOPIC with 2 waiting; its page shows the
// <script> body as text (the page title stays); the dead letter's Requeue
// button moves it back (3 waiting, 0 dead letters); the health page shows
// every node up and no address. Saves a screenshot of each page in SHOTS.
// Exits non-zero with the reason on the first failure.
//
// With LISTS=no (a broker that can neither list topics nor peek, RabbitMQ)
// it opens the topic by name and clicks Requeue all instead.
//
// node check.mjs BASE TOPIC SHOTS [LISTS]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [base, topic, shots, listsArg] = process.argv.slice(2);
const lists = listsArg !== 'no';
if (!base || !topic || !shots) {
  console.error('usage: node check.mjs BASE TOPIC SHOTS');
  process.exit(2);
}

function expect(ok, what) {
  if (!ok) {
    throw new Error(what);
  }
}

/** The cells of the table `id`'s row whose first cell is `first`. */
async function row(page, id, first) {
  return page.evaluate(
    ([id, first]) => {
      const rows = [...document.querySelectorAll(`#${id} tbody tr`)];
      const found = rows.find((r) => r.cells[0] && r.cells[0].textContent.trim() === first);
      return found ? [...found.cells].map((c) => c.textContent.trim()) : null;
    },
    [id, first],
  );
}

/** The single row of the table `id`. */
async function onlyRow(page, id) {
  return page.evaluate((id) => {
    const rows = [...document.querySelectorAll(`#${id} tbody tr`)];
    return rows.length === 1 ? [...rows[0].cells].map((c) => c.textContent.trim()) : null;
  }, id);
}

const profile = mkdtempSync(join(tmpdir(), 'ezmq-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.EZMQ_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
let failed = false;
try {
  const page = context.pages()[0] || (await context.newPage());
  const dialogs = [];
  page.on('dialog', async (d) => {
    dialogs.push(d.message());
    await d.dismiss();
  });

  await page.goto(`${base}/`);
  if (lists) {
    const listed = await row(page, 'topics', topic);
    expect(listed, `the overview lists ${topic}`);
    expect(listed[1] === '2', `${topic} shows 2 waiting on the overview, not ${listed[1]}`);
    await page.screenshot({ path: join(shots, 'overview.png'), fullPage: true });
    await page.click(`#topics a:text-is("${topic}")`);
  } else {
    await page.fill('input[name="name"]', topic);
    await page.click('button:text-is("Open")');
  }
  await page.waitForSelector('#numbers');
  expect((await page.textContent('h1')) === topic, 'the topic page opened');
  const title = await page.title();
  expect(title === `${topic} · ezmq`, `the <script> body did not run (title: ${title})`);
  if (lists) {
    const bodies = await page.$$eval('#waiting tbody tr td:nth-child(4)', (cells) =>
      cells.map((c) => c.textContent),
    );
    expect(
      bodies.includes("<script>document.title='pwned'</script>"),
      `the <script> body shown as text: ${JSON.stringify(bodies)}`,
    );
  }
  expect(dialogs.length === 0, `no dialog opened: ${dialogs}`);
  const before = await onlyRow(page, 'numbers');
  expect(before && before[0] === '2' && before[3] === '1', `2 waiting, 1 dead letter: ${before}`);
  await page.screenshot({ path: join(shots, 'topic.png'), fullPage: true });

  const requeue = lists
    ? '#dead-letters tbody tr button:text-is("Requeue")'
    : 'button:text-is("Requeue all")';
  await Promise.all([page.waitForNavigation(), page.click(requeue)]);
  const flash = await page.textContent('#flash');
  expect(flash === 'requeued 1', `the flash says requeued 1: ${flash}`);
  const after = await onlyRow(page, 'numbers');
  expect(after && after[0] === '3' && after[3] === '0', `3 waiting, 0 dead letters: ${after}`);
  await page.screenshot({ path: join(shots, 'after-requeue.png'), fullPage: true });

  for (const name of ['cron', 'groups', 'processes', 'health']) {
    await page.goto(`${base}/${name}`);
    await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  }
  const states = await page.$$eval('#nodes tbody tr td:nth-child(2)', (cells) =>
    cells.map((c) => c.textContent.trim()),
  );
  expect(
    states.length > 0 && states.every((s) => s === 'up'),
    `every node up on the health page: ${JSON.stringify(states)}`,
  );
  const healthText = await page.textContent('main');
  expect(!healthText.includes('127.0.0.1'), 'no broker address on the health page');
  console.log('browser check passed');
} catch (e) {
  failed = true;
  console.error(`browser check failed: ${e.message}`);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
