// The dashboard in a real browser: Debian's chromium driven by playwright-core (which downloads no
// browser). Starts flowguard-server on the in-memory store with a token, makes some state over the
// API, and checks what a person sees: the token prompt (missing, wrong, right token), group counts,
// a failed item's error and timeline, the held lock's holder and fence, a queue's numbers per
// shard, a partly used rate limiter, a semaphore's holders, and the page after a refresh. Screenshots go to target/dashboard-screenshots/ (ignored).
//
// FLOWGUARD_SERVER_BIN: the server binary (default: the newest target/*/debug/flowguard-server);
// FLOWGUARD_CHROMIUM: the browser (default /usr/bin/chromium).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { root, startServer, stopServer } from './server-process.mjs'

const shots = join(root, 'target', 'dashboard-screenshots')
const TOKEN = 'dashboard-test-token-0123456789'

let server
let browser
let base

async function call(path, body, token = TOKEN) {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  })
  const data = await res.json()
  assert.ok(res.ok, `${path}: ${res.status} ${JSON.stringify(data)}`)
  return data
}

before(async () => {
  const chrome = process.env.FLOWGUARD_CHROMIUM || '/usr/bin/chromium'
  assert.ok(existsSync(chrome), `no browser at ${chrome}: apt-get install chromium (or set FLOWGUARD_CHROMIUM)`)
  server = await startServer(['--log-format', 'text'], { FLOWGUARD_TOKEN: TOKEN, RUST_LOG: 'warn' })
  base = server.base
  browser = await chromium.launch({ executablePath: chrome })
  mkdirSync(shots, { recursive: true })
})

after(async () => {
  await browser?.close()
  await stopServer(server)
})

test('the dashboard shows groups, failed items, locks and queues, asks for the token and refreshes', async () => {
  // State: a group with completed, failed and in-progress items; a failed item with two attempts.
  await call('/v1/tracker/setItems', {
    group: 'weekly-sync',
    requests: [
      { id: 'sku-1', status: 'completed' },
      { id: 'sku-2', status: 'completed' },
      { id: 'sku-3', status: 'in_progress', timeoutMs: 600000 },
    ],
  })
  for (const error of ['timeout after 30 s', 'HTTP 502 from the shop API']) {
    const c = await call('/v1/tracker/claim', { group: 'weekly-sync', id: 'sku-9' })
    await call('/v1/tracker/fail', { group: 'weekly-sync', id: 'sku-9', owner: c.owner, reason: error })
  }
  await call('/v1/tracker/setItems', { group: 'invoices', requests: [{ id: 'inv-1', status: 'completed' }] })
  const lock = await call('/v1/lock/acquire', { name: 'nightly-export', label: 'worker-2 (exec 4711)', timeoutMs: 600000 })
  const ids = Array.from({ length: 10 }, (_, i) => `order-${i}`)
  await call('/v1/queue/enqueue', { queue: 'orders', ids, shards: 2 })
  const batch = await call('/v1/queue/readBatch', { queue: 'orders', shards: 2, limit: 3 })
  assert.equal(batch.items.length, 3)
  const size = await call('/v1/queue/size', { queue: 'orders', shards: 2 })
  // 3 of 10 tokens per 10 min taken: full again in 3 min.
  const taken = await call('/v1/limiter/take', { name: 'shop-api', limit: 10, periodMs: 600000, burst: 10, cost: 3 })
  assert.equal(taken.remaining, 7)
  const permit = await call('/v1/semaphore/acquire', { name: 'exports', permits: 3, label: 'worker-7', timeoutMs: 600000 })
  await call('/v1/semaphore/acquire', { name: 'exports', permits: 3, timeoutMs: 120000 })

  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  const errors = []
  page.on('pageerror', (e) => errors.push(e.message))
  page.on('console', (m) => m.type() === 'error' && !m.text().includes('401') && errors.push(m.text()))

  // No token yet: the page asks for one and shows no data.
  await page.goto(base + '/')
  await page.locator('#login').waitFor({ state: 'visible' })
  assert.equal(await page.locator('#sections section').count(), 0)
  assert.equal(await page.locator('#backend').textContent(), 'embedded store')
  await page.screenshot({ path: join(shots, '1-token-prompt.png') })

  // A wrong token is refused, and said so.
  await page.fill('#token', 'not-the-right-token-xxxxxxxx')
  await page.click('#login button[type=submit]')
  await page.locator('#login-error', { hasText: 'refused' }).waitFor()
  assert.ok(await page.locator('#login').isVisible())

  // The right one opens the dashboard.
  await page.fill('#token', TOKEN)
  await page.click('#login button[type=submit]')
  await page.locator('#sec-groups').waitFor()
  assert.ok(await page.locator('#login').isHidden())

  const group = page.locator('article[data-group="weekly-sync"]')
  const count = (status) => group.locator(`.count[data-status="${status}"] dd`).textContent()
  assert.equal(await count('completed'), '2')
  assert.equal(await count('failed'), '1')
  assert.equal(await count('in_progress'), '1')
  assert.equal(await count('abandoned'), '0')
  assert.match(await group.locator('.card-head').textContent(), /4 items/)
  assert.equal(await page.locator('article[data-group="invoices"] .count[data-status="completed"] dd').textContent(), '1')
  const failed = group.locator('tr[data-item="sku-9"]')
  assert.equal(await failed.locator('td.err').first().textContent(), 'HTTP 502 from the shop API')
  assert.equal(await failed.locator('td').nth(2).textContent(), '2', 'attempts')
  const timeline = await failed.locator('.timeline li').allTextContents()
  assert.equal(timeline.length, 4, `claim, fail, claim, fail: ${timeline}`)
  assert.match(timeline[1], /failed.*timeout after 30 s/)
  assert.match(timeline[3], /failed.*HTTP 502 from the shop API/)

  const row = page.locator('tr[data-lock="nightly-export"]')
  assert.equal(await row.locator('.holder').textContent(), 'worker-2 (exec 4711)')
  assert.equal(await row.locator('.fence').textContent(), String(lock.fence))
  assert.match(await row.locator('.left').textContent(), /^(9 min|10 min)/)

  const queue = page.locator('article[data-queue="orders"]')
  assert.match(await queue.locator('.card-head').textContent(), /2 shards/)
  const total = queue.locator('tr.total')
  assert.equal(await total.locator('td.q-waiting').textContent(), '7')
  assert.equal(await total.locator('td.q-claimed').textContent(), '3')
  for (const s of size.shards) {
    const r = queue.locator(`tr[data-shard="${s.shard}"]`)
    assert.equal(await r.locator('td.q-waiting').textContent(), String(s.waiting), `shard ${s.shard} waiting`)
    assert.equal(await r.locator('td.q-due').textContent(), String(s.due), `shard ${s.shard} due`)
    assert.equal(await r.locator('td.q-claimed').textContent(), String(s.claimed), `shard ${s.shard} claimed`)
  }

  const limiter = page.locator('tr[data-limiter="shop-api"]')
  assert.match(await limiter.locator('.reset').textContent(), /^(2 min 5\d s|3 min 0 s)$/)
  assert.match(await limiter.locator('.at').textContent(), /\d/)

  const sem = page.locator('article[data-semaphore="exports"]')
  assert.equal(await sem.locator('.holders').textContent(), '2 holders')
  const first = sem.locator(`tr[data-fence="${permit.fence}"]`)
  assert.equal(await first.locator('.holder').textContent(), 'worker-7')
  assert.match(await first.locator('.left').textContent(), /^(9 min|10 min)/)
  const second = sem.locator(`tr[data-fence="${permit.fence + 1}"]`)
  assert.equal(await second.locator('.holder').textContent(), 'no label')
  assert.match(await second.locator('.left').textContent(), /^(1 min|2 min)/)
  await page.screenshot({ path: join(shots, '2-dashboard.png'), fullPage: true })

  // Changes show after a refresh: one more failure, the lock released, the batch acknowledged.
  await page.uncheck('#auto')
  await call('/v1/tracker/setItems', { group: 'weekly-sync', requests: [{ id: 'sku-3', status: 'failed', error: 'out of stock' }] })
  await call('/v1/lock/release', { name: 'nightly-export', owner: lock.owner })
  await call('/v1/queue/ack', { queue: 'orders', shards: 2, owner: batch.owner, ids: batch.items.map((i) => i.id) })
  await call('/v1/semaphore/release', { name: 'exports', owner: permit.owner })
  await page.click('#refresh')
  await page.locator('#sec-locks .empty').waitFor()
  assert.equal(await count('failed'), '2')
  assert.equal(await count('in_progress'), '0')
  assert.equal(await group.locator('tr[data-item="sku-3"] td.err').textContent(), 'out of stock')
  assert.equal(await page.locator('#sec-locks .empty').textContent(), 'No lock is held.')
  assert.equal(await total.locator('td.q-waiting').textContent(), '7')
  assert.equal(await total.locator('td.q-claimed').textContent(), '0')
  assert.equal(await sem.locator('.holders').textContent(), '1 holder')
  assert.equal(await first.count(), 0, 'the released holder is gone')
  await page.screenshot({ path: join(shots, '3-after-refresh.png'), fullPage: true })
  await page.emulateMedia({ colorScheme: 'dark' })
  await page.screenshot({ path: join(shots, '4-dark.png'), fullPage: true })
  await page.setViewportSize({ width: 400, height: 800 })
  await page.screenshot({ path: join(shots, '5-narrow.png'), fullPage: true })

  // The token lives in this tab only: "Forget token" asks again.
  await page.click('#forget')
  await page.locator('#login').waitFor({ state: 'visible' })
  assert.equal(await page.locator('#sections section').count(), 0)
  assert.deepEqual(errors, [])
  await page.close()
})

test('the page and its assets are served without a token, with a strict content security policy', async () => {
  for (const [path, type] of [['/', 'text/html'], ['/dashboard/app.js', 'text/javascript'], ['/dashboard/app.css', 'text/css']]) {
    const res = await fetch(base + path)
    assert.equal(res.status, 200, path)
    assert.ok(res.headers.get('content-type').startsWith(type), path)
    assert.match(res.headers.get('content-security-policy'), /default-src 'none'; script-src 'self'/)
  }
  // The data is not: the listing routes need the token like every API route.
  for (const path of ['/v1/tracker/listGroups', '/v1/lock/list', '/v1/queue/list', '/v1/limiter/list', '/v1/semaphore/list']) {
    const res = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    assert.equal(res.status, 401, path)
    assert.equal((await res.json()).code, 'ERR_UNAUTHORIZED')
  }
})
