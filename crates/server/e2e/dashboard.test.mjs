// The dashboard in a real browser: Debian's chromium driven by playwright-core (which downloads no
// browser). Starts flowguard-server on the in-memory store with a token, makes some state over the
// API, and checks what a person sees: the token prompt (missing, wrong, right token), group counts,
// a failed item's error and timeline, the held lock's holder and fence, a queue's numbers per
// shard, a partly used rate limiter, a semaphore's holders, and the page after a refresh; an item
// found by group and id, forgotten after a confirmation, the action in the server's JSON log with
// who made it. Screenshots go to target/dashboard-screenshots/ (ignored).
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

/** A browser page at the dashboard's size, and the script errors it reports (401s are expected). */
async function newPage() {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  const errors = []
  page.on('pageerror', (e) => errors.push(e.message))
  page.on('console', (m) => m.type() === 'error' && !m.text().includes('401') && errors.push(m.text()))
  return { page, errors }
}

before(async () => {
  const chrome = process.env.FLOWGUARD_CHROMIUM || '/usr/bin/chromium'
  assert.ok(existsSync(chrome), `no browser at ${chrome}: apt-get install chromium (or set FLOWGUARD_CHROMIUM)`)
  server = await startServer(['--log-format', 'json'], { FLOWGUARD_TOKEN: TOKEN, FLOWGUARD_LOG: 'warn,flowguard::action=info' })
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

  const { page, errors } = await newPage()

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

/** The server's action log lines (JSON), parsed. */
function actions() {
  return server.output().split('\n').filter((l) => l.includes('"flowguard::action"')).map((l) => JSON.parse(l))
}

test('an item is found by group and id, and forgotten only after a confirmation; the action is logged with who made it', async () => {
  for (const reason of ['HTTP 429 from the CRM', 'HTTP 500 from the CRM']) {
    const c = await call('/v1/tracker/claim', { group: 'crm-sync', id: 'contact-42' })
    await call('/v1/tracker/fail', { group: 'crm-sync', id: 'contact-42', owner: c.owner, reason })
  }
  await call('/v1/tracker/setItems', { group: 'crm-sync', requests: [{ id: 'contact-7', status: 'completed' }] })

  const { page, errors } = await newPage()
  await page.goto(base + '/')
  await page.locator('#login').waitFor({ state: 'visible' })
  await page.fill('#token', TOKEN)
  await page.fill('#actor', 'Ada (ops)')
  await page.click('#login button[type=submit]')
  await page.locator('#sec-groups').waitFor()
  await page.uncheck('#auto')
  assert.ok(await page.locator('#find-item').isVisible())

  // Found by typing its group and id: status, attempts, last error and timeline.
  await page.fill('#find-group', 'crm-sync')
  await page.fill('#find-id', 'contact-42')
  await page.click('#find button[type=submit]')
  const view = page.locator('article[data-found="contact-42"]')
  await view.waitFor()
  assert.equal(await view.locator('.card-head .badge').textContent(), 'failed')
  const facts = await view.locator('dl.facts').textContent()
  assert.match(facts, /attempts2/)
  assert.match(facts, /last errorHTTP 500 from the CRM/)
  assert.equal(await view.locator('.timeline li').count(), 4)

  // An unknown id says so.
  await page.fill('#find-id', 'contact-404')
  await page.click('#find button[type=submit]')
  await page.locator('article[data-found="contact-404"] .empty').waitFor()

  // The failed item's id in its group's card opens it in the panel.
  await page.click('article[data-group="crm-sync"] tr[data-item="contact-42"] button.view')
  await view.waitFor()
  assert.equal(await page.inputValue('#find-id'), 'contact-42')

  // Forget asks first; Cancel leaves the item as it was and logs nothing.
  await page.click('button.forget-item')
  const confirm = view.locator('.confirm')
  await confirm.waitFor()
  assert.match(await confirm.textContent(), /Forget "contact-42" of group "crm-sync"\?/)
  await page.screenshot({ path: join(shots, '6-forget-confirm.png'), fullPage: true })
  await page.click('button.confirm-no')
  assert.equal(await confirm.count(), 0)
  assert.equal((await call('/v1/tracker/getItem', { group: 'crm-sync', id: 'contact-42' })).status, 'failed')
  assert.deepEqual(actions(), [])

  // Confirmed: the item is gone, the group's counts follow, and the log says who did it.
  await page.click('button.forget-item')
  await page.click('button.confirm-yes')
  await view.locator('.done', { hasText: 'Forgotten: "contact-42" of "crm-sync" (it was failed).' }).waitFor()
  assert.equal((await call('/v1/tracker/getItem', { group: 'crm-sync', id: 'contact-42' })).status, 'none')
  await page.locator('article[data-group="crm-sync"] .count[data-status="failed"] dd', { hasText: '0' }).waitFor()
  await page.screenshot({ path: join(shots, '7-forgotten.png'), fullPage: true })
  let logged = []
  for (let i = 0; i < 40 && logged.length === 0; i++) {
    logged = actions()
    if (!logged.length) await new Promise((r) => setTimeout(r, 25))
  }
  assert.equal(logged.length, 1, JSON.stringify(logged))
  const f = logged[0].fields
  assert.equal(f.actor, 'Ada (ops)')
  assert.equal(f.route, '/v1/tracker/unsetItem')
  assert.equal(f.subject, 'group="crm-sync" id="contact-42"')
  assert.equal(f.status, 200)
  assert.match(f.peer, /^127\.0\.0\.1:\d+$/)
  assert.ok(logged[0].timestamp, 'the line carries the time')
  assert.ok(!server.output().includes(TOKEN), 'the token is never logged')
  assert.deepEqual(errors, [])
  await page.close()
})

test("an item found shows its claim's note and its completion's result, as text", async () => {
  const c = await call('/v1/tracker/claim', { group: 'exports', id: 'page-3', note: 'page 3 of 7 <b>bold?</b>' })
  await call('/v1/tracker/complete', { group: 'exports', id: 'page-3', owner: c.owner, result: { rows: 250, file: 'export-3.csv', html: '<i>x</i>' } })
  await call('/v1/tracker/setItems', { group: 'exports', requests: [{ id: 'page-4', status: 'completed', result: 0 }] })
  await call('/v1/tracker/setItems', { group: 'exports', requests: [{ id: 'page-5', status: 'completed' }] })

  const { page, errors } = await newPage()
  await page.goto(base + '/')
  await page.locator('#login').waitFor({ state: 'visible' })
  await page.fill('#token', TOKEN)
  await page.click('#login button[type=submit]')
  await page.locator('#sec-groups').waitFor()
  await page.uncheck('#auto')
  await page.fill('#find-group', 'exports')
  await page.fill('#find-id', 'page-3')
  await page.click('#find button[type=submit]')
  const view = page.locator('article[data-found="page-3"]')
  await view.waitFor()
  assert.equal(await view.locator('dl.facts .note').textContent(), 'page 3 of 7 <b>bold?</b>')
  assert.equal(await view.locator('dl.facts b').count(), 0, 'the note is text, not markup')
  const shown = await view.locator('dl.facts pre.result').textContent()
  assert.deepEqual(JSON.parse(shown), { rows: 250, file: 'export-3.csv', html: '<i>x</i>' })
  await page.screenshot({ path: join(shots, '8a-item-result.png'), fullPage: true })

  // A falsy result is still a result; an item without one shows none.
  await page.fill('#find-id', 'page-4')
  await page.click('#find button[type=submit]')
  await page.locator('article[data-found="page-4"]').waitFor()
  assert.equal(await page.locator('article[data-found="page-4"] pre.result').textContent(), '0')
  await page.fill('#find-id', 'page-5')
  await page.click('#find button[type=submit]')
  await page.locator('article[data-found="page-5"]').waitFor()
  assert.equal(await page.locator('article[data-found="page-5"] pre.result').count(), 0)
  assert.equal(await page.locator('article[data-found="page-5"] .note').count(), 0)
  assert.deepEqual(errors, [])
  await page.close()
})

test('the dead and failed items of a group are retried only after a confirmation; the action is logged', async () => {
  const c = await call('/v1/tracker/claim', { group: 'billing', id: 'inv-1', maxAttempts: 1 })
  await call('/v1/tracker/fail', { group: 'billing', id: 'inv-1', owner: c.owner, reason: 'HTTP 500' })
  await call('/v1/tracker/fail', { group: 'billing', id: 'inv-2', reason: 'HTTP 429' })
  await call('/v1/tracker/setItems', { group: 'billing', requests: [{ id: 'inv-3', status: 'completed' }] })
  const revives = () => actions().filter((l) => l.fields.route === '/v1/tracker/reviveItems')

  const { page, errors } = await newPage()
  await page.goto(base + '/')
  await page.locator('#login').waitFor({ state: 'visible' })
  await page.fill('#token', TOKEN)
  await page.fill('#actor', 'Grace (ops)')
  await page.click('#login button[type=submit]')
  await page.locator('#sec-groups').waitFor()
  await page.uncheck('#auto')
  const card = page.locator('article[data-group="billing"]')
  await card.locator('.count[data-status="dead"] dd', { hasText: '1' }).waitFor()

  // Cancel leaves everything as it was and logs nothing.
  await card.locator('button.retry-group').click()
  const confirm = card.locator('.confirm')
  await confirm.waitFor()
  assert.match(await confirm.textContent(), /Retry 2 dead or failed items of group "billing"\?/)
  await page.screenshot({ path: join(shots, '8-retry-confirm.png'), fullPage: true })
  await card.locator('button.confirm-no').click()
  assert.equal(await confirm.count(), 0)
  assert.equal((await call('/v1/tracker/getItem', { group: 'billing', id: 'inv-1' })).status, 'dead')
  assert.deepEqual(revives(), [])

  // Confirmed: both are claimable again (failed, attempts kept), and the log says who did it.
  await card.locator('button.retry-group').click()
  await card.locator('button.confirm-yes').click()
  await card.locator('.done', { hasText: 'Retried: 2 items of "billing" can be claimed again.' }).waitFor()
  await page.screenshot({ path: join(shots, '9-retried.png'), fullPage: true })
  const items = await call('/v1/tracker/getItems', { group: 'billing', ids: ['inv-1', 'inv-2', 'inv-3'] })
  assert.deepEqual(items.map((i) => [i.status, i.attempts]), [['failed', 1], ['failed', 0], ['completed', 0]])
  assert.equal((await call('/v1/tracker/claim', { group: 'billing', id: 'inv-1' })).claimed, true)
  let logged = []
  for (let i = 0; i < 40 && logged.length === 0; i++) {
    logged = revives()
    if (!logged.length) await new Promise((r) => setTimeout(r, 25))
  }
  assert.equal(logged.length, 1, JSON.stringify(logged))
  assert.equal(logged[0].fields.actor, 'Grace (ops)')
  assert.equal(logged[0].fields.subject, 'group="billing"')
  assert.equal(logged[0].fields.status, 200)
  assert.deepEqual(errors, [])
  await page.close()
})

test('a lock is released by an operator only after a confirmation, only the grant shown; the action is logged', async () => {
  const stuck = await call('/v1/lock/acquire', { name: 'crm-import', label: 'run 77 (crashed)', timeoutMs: 600000 })
  const other = await call('/v1/lock/acquire', { name: 'invoice-export', label: 'run 78', timeoutMs: 600000 })
  const { page, errors } = await newPage()
  await page.goto(base + '/')
  await page.locator('#login').waitFor({ state: 'visible' })
  await page.fill('#token', TOKEN)
  await page.fill('#actor', 'Grace')
  await page.click('#login button[type=submit]')
  const row = page.locator('tr[data-lock="crm-import"]')
  await row.waitFor()
  await page.uncheck('#auto')
  const before = actions().length

  // Cancel changes nothing.
  await row.locator('button.release-lock').click()
  await row.locator('.confirm').waitFor()
  assert.match(await row.locator('.confirm').textContent(), /Release "crm-import", held by "run 77 \(crashed\)" \(fence /)
  await page.screenshot({ path: join(shots, '10-release-confirm.png'), fullPage: true })
  await row.locator('button.confirm-no').click()
  assert.equal((await call('/v1/lock/get', { name: 'crm-import' })).locked, true)
  assert.equal(actions().length, before)

  // Confirmed: the lock is free, the other lock untouched, the holder's own release refused.
  await row.locator('button.release-lock').click()
  await row.locator('button.confirm-yes').click()
  await row.locator('.done', { hasText: 'Released "crm-import"' }).waitFor()
  assert.equal((await call('/v1/lock/get', { name: 'crm-import' })).locked, false)
  assert.equal((await call('/v1/lock/get', { name: 'invoice-export' })).locked, true)
  assert.deepEqual(await call('/v1/lock/release', { name: 'crm-import', owner: stuck.owner }), { released: false, reason: 'not_held' })
  let logged = actions()
  for (let i = 0; i < 40 && logged.length === before; i++) {
    await new Promise((r) => setTimeout(r, 25))
    logged = actions()
  }
  assert.equal(logged.length, before + 1, 'one action logged')
  const f = logged.at(-1).fields
  assert.deepEqual([f.actor, f.route, f.subject, f.status], ['Grace', '/v1/lock/forceRelease', 'name="crm-import"', 200])

  // A lock that changed hands between showing and confirming is left alone, and the page says so.
  await page.click('#refresh')
  const row2 = page.locator('tr[data-lock="invoice-export"]')
  await row2.locator('button.release-lock').click()
  await call('/v1/lock/release', { name: 'invoice-export', owner: other.owner })
  const again = await call('/v1/lock/acquire', { name: 'invoice-export', label: 'run 79', timeoutMs: 600000 })
  await row2.locator('button.confirm-yes').click()
  await row2.locator('.error', { hasText: 'changed hands' }).waitFor()
  assert.equal((await call('/v1/lock/get', { name: 'invoice-export' })).fence, again.fence, 'the new grant keeps it')
  await call('/v1/lock/release', { name: 'invoice-export', owner: again.owner })
  assert.deepEqual(errors, [])
  await page.close()
})

test('a permit is released by an operator only after a confirmation, only the one shown; holders show their key; the action is logged', async () => {
  const stuck = await call('/v1/semaphore/acquire', { name: 'pdf-exports', permits: 3, key: 'customer-7', perKey: 1, label: 'run 90 (crashed)', timeoutMs: 600000 })
  const other = await call('/v1/semaphore/acquire', { name: 'pdf-exports', permits: 3, label: 'run 91', timeoutMs: 600000 })
  assert.equal((await fetch(base + '/v1/semaphore/acquire', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ name: 'pdf-exports', permits: 3, key: 'customer-7', perKey: 1 }),
  })).status, 409, 'the key is full')
  const { page, errors } = await newPage()
  await page.goto(base + '/')
  await page.locator('#login').waitFor({ state: 'visible' })
  await page.fill('#token', TOKEN)
  await page.fill('#actor', 'Grace')
  await page.click('#login button[type=submit]')
  const card = page.locator('article[data-semaphore="pdf-exports"]')
  const row = card.locator(`tr[data-fence="${stuck.fence}"]`)
  await row.waitFor()
  await page.uncheck('#auto')
  assert.equal(await row.locator('td.key').textContent(), 'customer-7')
  assert.match(await card.locator('.per-key').textContent(), /customer-7: 1/)
  const before = actions().length

  // Cancel changes nothing.
  await row.locator('button.release-permit').click()
  await row.locator('.confirm').waitFor()
  assert.match(await row.locator('.confirm').textContent(), /Release the permit of key "customer-7" of "pdf-exports", held by "run 90 \(crashed\)" \(fence /)
  await card.screenshot({ path: join(shots, '11-release-permit-confirm.png') })
  await row.locator('button.confirm-no').click()
  assert.equal((await call('/v1/semaphore/get', { name: 'pdf-exports' })).holders.length, 2)
  assert.equal(actions().length, before)

  // Confirmed: that permit is gone, the other kept, the holder's own release refused, the key free again.
  await row.locator('button.release-permit').click()
  await row.locator('button.confirm-yes').click()
  await row.locator('.done', { hasText: 'Released the permit of "pdf-exports"' }).waitFor()
  const info = await call('/v1/semaphore/get', { name: 'pdf-exports' })
  assert.deepEqual([info.holders.map((h) => h.fence), info.keys], [[other.fence], {}])
  assert.deepEqual(await call('/v1/semaphore/release', { name: 'pdf-exports', owner: stuck.owner }), { released: false, reason: 'not_held' })
  let logged = actions()
  for (let i = 0; i < 40 && logged.length === before; i++) {
    await new Promise((r) => setTimeout(r, 25))
    logged = actions()
  }
  assert.equal(logged.length, before + 1, 'one action logged')
  const f = logged.at(-1).fields
  assert.deepEqual([f.actor, f.route, f.subject, f.status], ['Grace', '/v1/semaphore/forceRelease', 'name="pdf-exports"', 200])
  const again = await call('/v1/semaphore/acquire', { name: 'pdf-exports', permits: 3, key: 'customer-7', perKey: 1 })
  assert.equal(again.acquired, true)

  // A permit released meanwhile: the page says it is not held any more.
  await page.click('#refresh')
  const row2 = card.locator(`tr[data-fence="${other.fence}"]`)
  await row2.locator('button.release-permit').click()
  await call('/v1/semaphore/release', { name: 'pdf-exports', owner: other.owner })
  await row2.locator('button.confirm-yes').click()
  await row2.locator('.error', { hasText: 'not held any more' }).waitFor()
  await call('/v1/semaphore/release', { name: 'pdf-exports', owner: again.owner })
  assert.deepEqual(errors, [])
  await page.close()
})

test('a queue shows its dead letters, requeued only after a confirmation; the action is logged', async () => {
  // 5 ids over 2 shards read with maxDeliveries 1, released, read again: all 5 die.
  const ids = ['sku-1', 'sku-2', 'sku-3', 'sku-4', 'sku-5']
  await call('/v1/queue/enqueue', { queue: 'stock-sync', ids, shards: 2 })
  const read = { queue: 'stock-sync', shards: 2, limit: 100, maxDeliveries: 1 }
  const b = await call('/v1/queue/readBatch', read)
  await call('/v1/queue/release', { queue: 'stock-sync', owner: b.owner, ids: b.ids, shards: 2 })
  assert.deepEqual((await call('/v1/queue/readBatch', read)).ids, [])
  assert.equal((await call('/v1/queue/size', { queue: 'stock-sync', shards: 2 })).dead, 5)

  const { page, errors } = await newPage()
  await page.goto(base + '/')
  await page.locator('#login').waitFor({ state: 'visible' })
  await page.fill('#token', TOKEN)
  await page.fill('#actor', 'Linus')
  await page.click('#login button[type=submit]')
  const card = page.locator('article[data-queue="stock-sync"]')
  await card.waitFor()
  await page.uncheck('#auto')
  assert.equal(await card.locator('tr.total td.q-dead').textContent(), '5')
  const before = actions().length

  // Cancel changes nothing.
  await card.locator('button.requeue-dead').click()
  await card.locator('.confirm').waitFor()
  assert.match(await card.locator('.confirm').textContent(), /Requeue 5 dead letters of "stock-sync"\?/)
  await page.screenshot({ path: join(shots, '12-requeue-dead-confirm.png'), fullPage: true })
  await card.locator('button.confirm-no').click()
  assert.equal((await call('/v1/queue/size', { queue: 'stock-sync', shards: 2 })).dead, 5)
  assert.equal(actions().length, before)

  // Confirmed: all 5 wait again, due now, and a read with maxDeliveries 1 delivers them.
  await card.locator('button.requeue-dead').click()
  await card.locator('button.confirm-yes').click()
  await card.locator('.done', { hasText: 'Requeued 5 dead letters of "stock-sync".' }).waitFor()
  await page.screenshot({ path: join(shots, '13-requeue-dead-done.png'), fullPage: true })
  const size = await call('/v1/queue/size', { queue: 'stock-sync', shards: 2 })
  assert.deepEqual([size.dead, size.waiting], [0, 5])
  assert.deepEqual((await call('/v1/queue/readBatch', read)).ids.sort(), ids)
  let logged = actions()
  for (let i = 0; i < 40 && logged.length === before; i++) {
    await new Promise((r) => setTimeout(r, 25))
    logged = actions()
  }
  assert.equal(logged.length, before + 1, 'one action logged')
  const f = logged.at(-1).fields
  assert.deepEqual([f.actor, f.route, f.subject, f.status], ['Linus', '/v1/queue/requeueDead', 'queue="stock-sync"', 200])
  assert.deepEqual(errors, [])
  await page.close()
})

test('the action header is checked: a bad name is refused with a coded error, before anything runs', async () => {
  for (const bad of ['', 'x'.repeat(65), 'a\u0001b']) {
    const res = await fetch(base + '/v1/tracker/unsetItem', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, 'x-flowguard-actor': bad },
      body: JSON.stringify({ group: 'crm-sync', id: 'contact-7' }),
    }).catch((e) => ({ status: 'refused by fetch', e }))
    // fetch itself refuses a control character in a header value; the server refuses the rest.
    if (res.status === 'refused by fetch') continue
    assert.equal(res.status, 400, JSON.stringify(bad))
    assert.equal((await res.json()).code, 'ERR_INVALID_HEADER')
  }
  assert.equal((await call('/v1/tracker/getItem', { group: 'crm-sync', id: 'contact-7' })).status, 'completed')
  // Without the token, the header does not make a call an action: refused, and not logged.
  const before = actions().length
  const res = await fetch(base + '/v1/tracker/unsetItem', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-flowguard-actor': 'Mallory' },
    body: JSON.stringify({ group: 'crm-sync', id: 'contact-7' }),
  })
  assert.equal(res.status, 401)
  assert.equal(actions().length, before)
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
