// Throwaway redis-server processes for the suites that stop, restart or reconfigure a server of
// their own (the shared one from REDIS_URL must stay up for the other suites). FLOWGUARD_REDIS_SERVER
// names another Redis-compatible server binary (scripts/test.mjs's Valkey leg sets its valkey-server).
import { spawn, spawnSync } from 'node:child_process'
import net from 'node:net'
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** The server binary these helpers start: redis-server unless FLOWGUARD_REDIS_SERVER names another. */
export const serverBin = process.env.FLOWGUARD_REDIS_SERVER || 'redis-server'
export const haveRedis = spawnSync(serverBin, ['--version']).status === 0
if (process.env.CI === 'true' && !haveRedis) throw new Error(`CI=true but ${serverBin} is not installed`)

/** A TCP port free on loopback right now. */
export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** True once something accepts connections on 127.0.0.1:port (tries for about 5 s). */
export async function waitForPort(port) {
  for (let i = 0; i < 200; i++) {
    const up = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.end(); resolve(true) })
      c.on('error', () => resolve(false))
    })
    if (up) return true
    await sleep(25)
  }
  return false
}

/** Starts the server (redis-server) on 127.0.0.1:port (no persistence) with `extra` arguments. */
export async function startRedis(port, extra = []) {
  const p = spawn(serverBin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...extra], { stdio: 'ignore' })
  if (await waitForPort(port)) return p
  p.kill('SIGKILL')
  throw new Error(`${serverBin} did not start`)
}

/** Kills a redis-server started by startRedis and waits for it to exit. */
export async function stopRedis(p) {
  if (!p || p.exitCode !== null || p.signalCode !== null) return
  const exited = new Promise((r) => p.once('exit', r))
  p.kill('SIGKILL')
  await exited
}
