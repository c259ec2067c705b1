// The flowguard dashboard: reads the server's listing routes and shows them. No framework, no
// build step; every value from the server is set as text (never parsed as HTML).
//
// A section is an entry of SECTIONS: { id, title, load(cursor) -> { rows, cursor }, render(rows) ->
// Node, empty }. To show something new, add a listing route to the server and a section here.
// Actions (forgetting an item) ask for a confirmation first and are sent with the name the person
// gave at the token prompt (X-Flowguard-Actor), which the server writes to its action log.
'use strict'

const TOKEN_KEY = 'flowguard.token'
const ACTOR_KEY = 'flowguard.actor'
const PAGE = 50
const FAILED_SHOWN = 10
const AUTO_MS = 5000

class AuthError extends Error {}

let token = sessionStorage.getItem(TOKEN_KEY) || ''
let actor = sessionStorage.getItem(ACTOR_KEY) || ''

/** One API call: POST with a JSON body; the server's coded error as an Error. */
async function api(path, body, extraHeaders) {
  const headers = { 'content-type': 'application/json', ...extraHeaders }
  if (token) headers.authorization = `Bearer ${token}`
  const res = await fetch(path, { method: 'POST', headers, body: JSON.stringify(body || {}) })
  const data = await res.json().catch(() => null)
  if (res.status === 401) throw new AuthError(token ? 'The server refused this token.' : '')
  if (!res.ok) {
    const e = new Error(data && data.message ? `${data.code}: ${data.message}` : `${path} answered ${res.status}`)
    throw e
  }
  return data
}

/** An action: an API call that names who makes it, for the server's action log. */
const act = (path, body) => api(path, body, { 'x-flowguard-actor': actor || 'dashboard' })

/** Builds an element: h('td', { class: 'n' }, 'text', child, …). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue
    if (k === 'class') el.className = v
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v)
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue
    el.append(c instanceof Node ? c : document.createTextNode(String(c)))
  }
  return el
}

const fmt = new Intl.NumberFormat('en')
const num = (n) => fmt.format(n)

function duration(ms) {
  if (ms < 1000) return `${ms} ms`
  const s = ms / 1000
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`
  const hours = Math.floor(m / 60)
  if (hours < 48) return `${hours} h ${m % 60} min`
  return `${Math.floor(hours / 24)} d ${hours % 24} h`
}

function when(t) {
  if (!t) return ''
  const d = Date.now() - t
  return d >= 0 ? `${duration(d)} ago` : `in ${duration(-d)}`
}

const iso = (t) => (t ? new Date(t).toISOString() : '')
const time = (t) => h('time', { datetime: iso(t), title: iso(t) }, when(t))

const STATUS_LABEL = { in_progress: 'in progress', abandoned: 'abandoned', completed: 'completed', failed: 'failed', dead: 'dead' }
const badge = (status, text) => h('span', { class: `badge s-${status}` }, text ?? STATUS_LABEL[status] ?? status)

// ---- Item Tracker groups ---------------------------------------------------------------------

async function loadGroups(cursor) {
  const page = await api('/v1/tracker/listGroups', { cursor, limit: PAGE })
  const rows = await Promise.all(
    page.groups.map(async (g) => {
      const failed = g.counts.failed > 0
        ? (await api('/v1/tracker/listItems', { group: g.group, status: 'failed', limit: FAILED_SHOWN })).items
        : []
      return { ...g, failed }
    }),
  )
  return { rows, cursor: page.cursor }
}

function timeline(item) {
  return h('ol', { class: 'timeline' },
    item.timeline.map((t) => h('li', { class: `s-${t.status}` },
      time(t.at), ' ', badge(t.status), t.attempt ? h('span', { class: 'muted' }, ` attempt ${t.attempt}`) : null,
      t.error ? h('span', { class: 'err' }, ` ${t.error}`) : null)))
}

function renderGroups(rows) {
  const counts = ['in_progress', 'abandoned', 'completed', 'failed', 'dead']
  const key = { in_progress: 'inProgress', abandoned: 'abandoned', completed: 'completed', failed: 'failed', dead: 'dead' }
  return h('div', { class: 'cards' }, rows.map((g) => h('article', { class: 'card', 'data-group': g.group },
    h('div', { class: 'card-head' },
      h('h3', {}, g.group),
      h('span', { class: 'muted' }, g.counts.total === 1 ? '1 item' : `${num(g.counts.total)} items`)),
    h('dl', { class: 'counts' }, counts.map((s) => h('div', { class: `count s-${s}${g.counts[key[s]] ? '' : ' zero'}`, 'data-status': s },
      h('dt', {}, STATUS_LABEL[s]), h('dd', {}, num(g.counts[key[s]]))))),
    g.failed.length
      ? h('details', { class: 'failed', open: true },
        h('summary', {}, `Failed items${g.counts.failed > g.failed.length ? ` (latest ${g.failed.length} of ${num(g.counts.failed)})` : ''}`),
        h('table', {},
          h('thead', {}, h('tr', {}, h('th', {}, 'item'), h('th', {}, 'error'), h('th', { class: 'n' }, 'attempts'), h('th', {}, 'failed'), h('th', {}, 'timeline'))),
          h('tbody', {}, g.failed.map((it) => h('tr', { 'data-item': it.id },
            h('td', { class: 'mono' }, h('button', { type: 'button', class: 'link mono view', title: 'show this item', onclick: () => findItem(g.group, it.id) }, it.id)),
            h('td', { class: 'err' }, it.lastError || ''),
            h('td', { class: 'n' }, num(it.attempts)),
            h('td', {}, time(it.finishedAt || it.updatedAt)),
            h('td', {}, timeline(it)))))))
      : null,
    (g.counts.failed || 0) + (g.counts.dead || 0) > 0 ? retryAction(g) : null)))
}

/** The group's "Retry dead/failed items…" action (Bull Board's retry, BullMQ's retryJobs): after a
 * confirmation, every dead and failed item of the group (at most 10,000 of each) is revived in one
 * call, attempts kept: the group's next claims take them again. Logged by the server with the actor. */
function retryAction(g) {
  const actions = h('div', { class: 'actions' })
  const retry = h('button', { type: 'button', class: 'danger retry-group', onclick: () => confirmRetry() }, 'Retry dead/failed items…')
  actions.append(retry)
  function confirmRetry() {
    retry.disabled = true
    const n = (g.counts.failed || 0) + (g.counts.dead || 0)
    const box = h('div', { class: 'confirm', role: 'alertdialog', 'aria-label': 'Confirm retrying the group\'s items' },
      h('p', {}, `Retry ${num(n)} dead or failed item${n === 1 ? '' : 's'} of group "${g.group}"? Each becomes claimable again with its attempts, last error and timeline kept; the next run claims it.`),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'danger confirm-yes', onclick: async () => {
          box.querySelectorAll('button').forEach((b) => { b.disabled = true })
          try {
            const ids = []
            for (const status of ['dead', 'failed']) {
              const page = await api('/v1/tracker/listItems', { group: g.group, status, limit: 10000 })
              ids.push(...page.items.map((it) => it.id))
            }
            const r = ids.length ? await act('/v1/tracker/reviveItems', { group: g.group, ids, failed: true }) : []
            const done = r.filter((x) => x.ok).length
            // The counts update with the next refresh; the outcome stays shown until then.
            actions.replaceChildren(h('p', { class: 'done', role: 'status' }, `Retried: ${num(done)} item${done === 1 ? '' : 's'} of "${g.group}" can be claimed again.`))
          } catch (e) {
            actions.replaceChildren(h('p', { class: 'error', role: 'alert' }, `Not retried: ${e.message}`))
          }
        } }, 'Retry'),
        h('button', { type: 'button', class: 'quiet confirm-no', onclick: () => { box.remove(); retry.disabled = false } }, 'Cancel')))
    actions.append(box)
  }
  return actions
}

// ---- One item: find, show, forget ------------------------------------------------------------

/** Shows `id` of `group` in the "Find an item" panel, with what can be done to it. */
async function findItem(group, id) {
  $('find-group').value = group
  $('find-id').value = id
  const out = $('found')
  try {
    const item = await api('/v1/tracker/getItem', { group, id })
    out.replaceChildren(renderItem(group, item))
  } catch (e) {
    if (e instanceof AuthError) return showLogin(e.message)
    out.replaceChildren(h('p', { class: 'error', role: 'alert' }, e.message))
  }
  $('find-item').scrollIntoView({ block: 'nearest' })
}

function renderItem(group, item) {
  if (item.status === 'none') {
    return h('article', { class: 'card item-view', 'data-found': item.id },
      h('p', { class: 'empty' }, `No item "${item.id}" in group "${group}": never claimed, forgotten, or its record expired.`))
  }
  const fact = (label, value) => (value === null || value === undefined || value === '' ? null : [h('dt', {}, label), h('dd', {}, value)])
  const view = h('article', { class: 'card item-view', 'data-found': item.id },
    h('div', { class: 'card-head' },
      h('h3', {}, h('span', { class: 'mono' }, item.id), ' ', h('span', { class: 'muted' }, `in ${group}`)),
      badge(item.status)),
    h('dl', { class: 'facts' },
      fact('attempts', num(item.attempts)),
      fact('last error', item.lastError ? h('span', { class: 'err' }, item.lastError) : null),
      fact('note', item.note ? h('span', { class: 'note' }, item.note) : null),
      // Any JSON value (null, false and 0 too): shown as its JSON text, as text (never markup).
      fact('result', 'result' in item ? h('pre', { class: 'result mono' }, JSON.stringify(item.result, null, 2)) : null),
      fact('first claimed', item.createdAt ? time(item.createdAt) : null),
      fact('updated', item.updatedAt ? time(item.updatedAt) : null),
      fact('lease ends', item.leaseExpiresAt ? time(item.leaseExpiresAt) : null),
      fact('finished', item.finishedAt ? time(item.finishedAt) : null),
      fact('record kept until', item.expiresAt ? time(item.expiresAt) : null)),
    item.timeline.length ? timeline(item) : h('p', { class: 'muted' }, 'No timeline kept for this item.'))
  const actions = h('div', { class: 'actions' })
  const forget = h('button', { type: 'button', class: 'danger forget-item', onclick: () => confirmForget() }, 'Forget item…')
  actions.append(forget)
  view.append(actions)

  function confirmForget() {
    forget.disabled = true
    const box = h('div', { class: 'confirm', role: 'alertdialog', 'aria-label': 'Confirm forgetting the item' },
      h('p', {}, `Forget "${item.id}" of group "${group}"? Its record, attempts and timeline are removed; the next claim starts again at attempt 1. `,
        item.status === 'in_progress' ? h('strong', {}, 'It is claimed now: its holder can no longer complete it.') : null),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'danger confirm-yes', onclick: async () => {
          box.querySelectorAll('button').forEach((b) => { b.disabled = true })
          try {
            const r = await act('/v1/tracker/unsetItem', { group, id: item.id })
            // The record shown is gone: only the outcome stays.
            view.replaceChildren(h('p', { class: 'done', role: 'status' }, r.existed
              ? `Forgotten: "${item.id}" of "${group}" (it was ${STATUS_LABEL[item.status] ?? item.status}).`
              : `"${item.id}" of "${group}" was already gone.`))
            refresh()
          } catch (e) {
            actions.replaceChildren(h('p', { class: 'error', role: 'alert' }, `Not forgotten: ${e.message}`))
          }
        } }, 'Forget'),
        h('button', { type: 'button', class: 'quiet confirm-no', onclick: () => { box.remove(); forget.disabled = false } }, 'Cancel')))
    actions.append(box)
  }
  return view
}

// ---- Locks -----------------------------------------------------------------------------------

async function loadLocks(cursor) {
  const page = await api('/v1/lock/list', { cursor, limit: PAGE })
  return { rows: page.locks, cursor: page.cursor }
}

function renderLocks(rows) {
  return h('table', { class: 'grid' },
    h('thead', {}, h('tr', {}, h('th', {}, 'lock'), h('th', {}, 'holder'), h('th', { class: 'n' }, 'time left'), h('th', { class: 'n' }, 'fence'), h('th', {}, ''))),
    h('tbody', {}, rows.map((l) => {
      const cell = h('td', { class: 'act' })
      const release = h('button', { type: 'button', class: 'quiet release-lock', onclick: () => confirmRelease(l, cell, release) }, 'Release…')
      cell.append(release)
      return h('tr', { 'data-lock': l.name },
        h('td', { class: 'mono' }, l.name),
        h('td', { class: 'holder' }, l.holder ? l.holder : h('span', { class: 'muted' }, 'no label')),
        h('td', { class: 'n left', title: `until ${iso(Date.now() + l.remainingMs)}` }, duration(l.remainingMs)),
        h('td', { class: 'n fence' }, num(l.fence)),
        cell)
    })))
}

/**
 * Asks before releasing lock `l` without its owner: only the grant shown (its fence) is
 * released, so a lock taken again meanwhile is left alone. Auto-refresh waits meanwhile.
 */
function confirmRelease(l, cell, button) {
  const who = l.holder ? `held by "${l.holder}"` : 'held by a holder with no label'
  confirmForce(cell, button, {
    label: 'Confirm releasing the lock',
    question: `Release "${l.name}", ${who} (fence ${num(l.fence)}), without its owner? Do this only when the holder is gone: `,
    route: '/v1/lock/forceRelease',
    body: { name: l.name, fence: l.fence },
    done: `Released "${l.name}" (fence ${num(l.fence)}).`,
    refused: (r) => r.reason === 'not_owner'
      ? `Not released: "${l.name}" changed hands since it was shown (another fence holds it now).`
      : `Not released: "${l.name}" is free already.`,
  })
}

/**
 * Asks before releasing permit `p` of semaphore `s` without its owner: only the permit with the
 * fence shown is released (fences are never issued twice). Auto-refresh waits meanwhile.
 */
function confirmPermitRelease(s, p, cell, button) {
  const who = p.label ? `held by "${p.label}"` : 'held by a holder with no label'
  const key = p.key !== undefined ? ` of key "${p.key}"` : ''
  confirmForce(cell, button, {
    label: 'Confirm releasing the permit',
    question: `Release the permit${key} of "${s.name}", ${who} (fence ${num(p.fence)}), without its owner? Do this only when the holder is gone: `,
    route: '/v1/semaphore/forceRelease',
    body: { name: s.name, fence: p.fence },
    done: `Released the permit of "${s.name}" (fence ${num(p.fence)}).`,
    refused: () => `Not released: the permit of "${s.name}" with fence ${num(p.fence)} is not held any more.`,
  })
}

/** The confirmation step of an operator's release (`ask`: what to say and which route to call). */
function confirmForce(cell, button, ask) {
  button.disabled = true
  pauseAuto = true
  const box = h('div', { class: 'confirm', role: 'alertdialog', 'aria-label': ask.label },
    h('p', {}, ask.question,
      'work it still runs is no longer protected, and its next release or extension is refused.'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'danger confirm-yes', onclick: async () => {
        box.querySelectorAll('button').forEach((b) => { b.disabled = true })
        let said
        try {
          const r = await act(ask.route, ask.body)
          said = r.released
            ? h('p', { class: 'done', role: 'status' }, ask.done)
            : h('p', { class: 'error', role: 'alert' }, ask.refused(r))
        } catch (e) {
          said = h('p', { class: 'error', role: 'alert' }, `Not released: ${e.message}`)
        }
        cell.replaceChildren(said)
        pauseAuto = false
      } }, 'Release'),
      h('button', { type: 'button', class: 'quiet confirm-no', onclick: () => { box.remove(); button.disabled = false; pauseAuto = false } }, 'Cancel')))
  cell.append(box)
}

// ---- Dedup queues ----------------------------------------------------------------------------

async function loadQueues(cursor) {
  const page = await api('/v1/queue/list', { cursor, limit: PAGE })
  return { rows: page.queues, cursor: page.cursor }
}

const QUEUE_COLS = ['waiting', 'due', 'claimed', 'again', 'dead']
const QUEUE_HELP = {
  waiting: 'ids waiting, due or not',
  due: 'waiting ids that are due now',
  claimed: 'ids held by a reader',
  again: 'claimed ids enqueued again, delivered once more after their claim',
  dead: 'dead letters: ids a read with maxDeliveries found delivered that many times without an ack',
}

/** The most dead letters one "Requeue dead letters" puts back (one page of deadLetters). */
const REQUEUE_PAGE = 1000

function renderQueues(rows) {
  const head = (first) => h('thead', {}, h('tr', {}, h('th', {}, first), QUEUE_COLS.map((c) => h('th', { class: 'n', title: QUEUE_HELP[c] }, c))))
  const cells = (s) => QUEUE_COLS.map((c) => h('td', { class: `n q-${c}${s[c] ? '' : ' zero'}` }, num(s[c])))
  return h('div', { class: 'cards' }, rows.map((q) => h('article', { class: 'card', 'data-queue': q.queue },
    h('div', { class: 'card-head' },
      h('h3', {}, q.queue),
      h('span', { class: 'muted' }, q.shardCount === 1 ? '1 shard' : `${q.shardCount} shards`)),
    h('table', { class: 'grid' }, head(''), h('tbody', {}, h('tr', { class: 'total' }, h('th', {}, 'total'), cells(q)))),
    q.shardCount > 1
      ? h('details', { class: 'shards', open: q.shardCount <= 8 },
        h('summary', {}, 'per shard'),
        h('table', { class: 'grid' }, head('shard'), h('tbody', {},
          q.shards.map((s) => h('tr', { 'data-shard': s.shard }, h('th', {}, `#${s.shard}`), cells(s))))))
      : null,
    q.dead > 0 ? requeueAction(q) : null)))
}

/** The "Requeue dead letters…" action of a queue card, behind a confirmation. */
function requeueAction(q) {
  const cell = h('div', { class: 'act' })
  const button = h('button', { type: 'button', class: 'quiet requeue-dead', onclick: () => confirmRequeue(q, cell, button) }, 'Requeue dead letters…')
  cell.append(button)
  return cell
}

/**
 * Asks before putting queue `q`'s dead letters back as waiting (due now, deliveries reset): the
 * first page of them (up to REQUEUE_PAGE, oldest death first), in one call. Auto-refresh waits meanwhile.
 */
function confirmRequeue(q, cell, button) {
  button.disabled = true
  pauseAuto = true
  const n = Math.min(q.dead, REQUEUE_PAGE)
  const box = h('div', { class: 'confirm', role: 'alertdialog', 'aria-label': 'Confirm requeueing the dead letters' },
    h('p', {}, `Requeue ${num(n)} dead letter${n === 1 ? '' : 's'} of "${q.queue}"${q.dead > n ? ` (the oldest ${num(n)} of ${num(q.dead)})` : ''}? `,
      'They are delivered again at once, their deliveries counted from 0: do this once what made them fail is fixed.'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'danger confirm-yes', onclick: async () => {
        box.querySelectorAll('button').forEach((b) => { b.disabled = true })
        let said
        try {
          const shards = q.shardCount
          const page = await api('/v1/queue/deadLetters', { queue: q.queue, shards, limit: REQUEUE_PAGE })
          const ids = page.items.map((d) => d.id)
          const r = ids.length ? await act('/v1/queue/requeueDead', { queue: q.queue, ids, shards }) : { requeued: 0 }
          said = h('p', { class: 'done', role: 'status' }, `Requeued ${num(r.requeued)} dead letter${r.requeued === 1 ? '' : 's'} of "${q.queue}".`)
        } catch (e) {
          said = h('p', { class: 'error', role: 'alert' }, `Not requeued: ${e.message}`)
        }
        cell.replaceChildren(said)
        pauseAuto = false
      } }, 'Requeue'),
      h('button', { type: 'button', class: 'quiet confirm-no', onclick: () => { box.remove(); button.disabled = false; pauseAuto = false } }, 'Cancel')))
  cell.append(box)
}

// ---- Rate limiters ---------------------------------------------------------------------------

async function loadLimiters(cursor) {
  const page = await api('/v1/limiter/list', { cursor, limit: PAGE })
  return { rows: page.limiters, cursor: page.cursor }
}

// The rule (limit, period, burst) is given by each take and not stored: what a limiter holds is
// the time until it is full again, which is what is shown.
function renderLimiters(rows) {
  return h('table', { class: 'grid' },
    h('thead', {}, h('tr', {}, h('th', {}, 'limiter'),
      h('th', { class: 'n', title: 'time until its burst is available again if nothing else is taken' }, 'full again in'),
      h('th', { class: 'n' }, 'full again at'))),
    h('tbody', {}, rows.map((l) => {
      const at = l.readAt + l.resetAfterMs
      return h('tr', { 'data-limiter': l.name },
        h('td', { class: 'mono' }, l.name),
        h('td', { class: 'n reset' }, duration(Math.ceil(l.resetAfterMs))),
        h('td', { class: 'n at' }, h('time', { datetime: iso(at) }, new Date(at).toLocaleTimeString())))
    })))
}

// ---- Semaphores ------------------------------------------------------------------------------

async function loadSemaphores(cursor) {
  const page = await api('/v1/semaphore/list', { cursor, limit: PAGE })
  return { rows: page.semaphores, cursor: page.cursor }
}

function renderSemaphores(rows) {
  return h('div', { class: 'cards' }, rows.map((s) => h('article', { class: 'card', 'data-semaphore': s.name },
    h('div', { class: 'card-head' },
      h('h3', {}, s.name),
      h('span', { class: 'muted holders' }, s.holders.length === 1 ? '1 holder' : `${num(s.holders.length)} holders`),
      Object.keys(s.keys ?? {}).length
        ? h('span', { class: 'muted per-key' }, Object.entries(s.keys).map(([k, n]) => `${k}: ${num(n)}`).join(' · '))
        : false),
    h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, h('th', {}, 'holder'), h('th', {}, 'key'), h('th', { class: 'n' }, 'time left'), h('th', { class: 'n' }, 'fence'), h('th', {}, ''))),
      h('tbody', {}, s.holders.map((p) => {
        const cell = h('td', { class: 'act' })
        const release = h('button', { type: 'button', class: 'quiet release-permit', onclick: () => confirmPermitRelease(s, p, cell, release) }, 'Release…')
        cell.append(release)
        return h('tr', { 'data-fence': p.fence },
          h('td', { class: 'holder' }, p.label ? p.label : h('span', { class: 'muted' }, 'no label')),
          h('td', { class: 'mono key' }, p.key !== undefined ? p.key : h('span', { class: 'muted' }, '—')),
          h('td', { class: 'n left', title: `until ${iso(Date.now() + p.remainingMs)}` }, duration(p.remainingMs)),
          h('td', { class: 'n fence' }, num(p.fence)),
          cell)
      }))))))
}

// ---- Page ------------------------------------------------------------------------------------

const SECTIONS = [
  { id: 'groups', title: 'Item Tracker', load: loadGroups, render: renderGroups, empty: 'No group holds items.' },
  { id: 'locks', title: 'Locks held', load: loadLocks, render: renderLocks, empty: 'No lock is held.' },
  { id: 'queues', title: 'Dedup queues', load: loadQueues, render: renderQueues, empty: 'No queue holds ids.' },
  { id: 'limiters', title: 'Rate limiters in use', load: loadLimiters, render: renderLimiters, empty: 'No rate limiter is in use.' },
  { id: 'semaphores', title: 'Semaphores held', load: loadSemaphores, render: renderSemaphores, empty: 'No semaphore is held.' },
]

const $ = (id) => document.getElementById(id)
let timer = null
let busy = false
// While a confirmation is open, the periodic refresh waits (it would redraw it away).
let pauseAuto = false

function showLogin(message) {
  $('login').hidden = false
  $('find-item').hidden = true
  $('found').replaceChildren()
  $('actor').value = actor
  $('controls').hidden = true
  $('sections').replaceChildren()
  $('login-error').textContent = message || ''
  $('forget').hidden = !token
  $('token').focus()
}

async function renderSection(s, state) {
  const body = state.rows.length ? s.render(state.rows) : h('p', { class: 'empty' }, s.empty)
  const more = state.cursor
    ? h('button', {
      type: 'button',
      class: 'quiet more',
      onclick: async (ev) => {
        ev.target.disabled = true
        try {
          const next = await s.load(state.cursor)
          state.rows = state.rows.concat(next.rows)
          state.cursor = next.cursor
          $(`sec-${s.id}`).replaceWith(await renderSection(s, state))
        } catch (e) {
          problem(e)
        }
      },
    }, 'Load more')
    : null
  return h('section', { id: `sec-${s.id}`, 'aria-labelledby': `h-${s.id}` },
    h('h2', { id: `h-${s.id}` }, s.title, state.rows.length ? h('span', { class: 'n-rows' }, num(state.rows.length) + (state.cursor ? '+' : '')) : null),
    body, more)
}

function problem(e) {
  $('problem').hidden = !e
  $('problem').textContent = e ? `Could not read the server: ${e.message}` : ''
}

async function refresh() {
  if (busy) return
  busy = true
  try {
    const loaded = await Promise.all(SECTIONS.map((s) => s.load(undefined)))
    const nodes = await Promise.all(SECTIONS.map((s, i) => renderSection(s, loaded[i])))
    $('login').hidden = true
    $('find-item').hidden = false
    $('controls').hidden = false
    $('forget').hidden = !token
    $('sections').replaceChildren(...nodes)
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`
    problem(null)
  } catch (e) {
    if (e instanceof AuthError) {
      stopAuto()
      showLogin(e.message)
    } else {
      problem(e)
    }
  } finally {
    busy = false
  }
}

function stopAuto() {
  clearInterval(timer)
  timer = null
}

function startAuto() {
  stopAuto()
  if ($('auto').checked) timer = setInterval(() => { if (!pauseAuto) refresh() }, AUTO_MS)
}

$('login').addEventListener('submit', (ev) => {
  ev.preventDefault()
  token = $('token').value.trim()
  $('token').value = ''
  if (token) sessionStorage.setItem(TOKEN_KEY, token)
  else sessionStorage.removeItem(TOKEN_KEY)
  actor = $('actor').value.trim()
  if (actor) sessionStorage.setItem(ACTOR_KEY, actor)
  else sessionStorage.removeItem(ACTOR_KEY)
  refresh().then(startAuto)
})
$('find').addEventListener('submit', (ev) => {
  ev.preventDefault()
  findItem($('find-group').value.trim(), $('find-id').value.trim())
})
$('refresh').addEventListener('click', refresh)
$('auto').addEventListener('change', startAuto)
$('forget').addEventListener('click', () => {
  token = ''
  sessionStorage.removeItem(TOKEN_KEY)
  stopAuto()
  showLogin('')
})

fetch('/readyz').then((r) => r.json()).then((r) => {
  if (r.backend) $('backend').textContent = `${r.backend} store`
}).catch(() => {})
refresh().then(startAuto)
