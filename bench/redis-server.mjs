// The benchmarks' Redis: the server at REDIS_URL, or a throwaway redis-server of their own on a
// free loopback port (no persistence, its own temporary directory), stopped at exit or on Ctrl-C.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import net from 'node:net'

/** A TCP port free on loopback right now. */
export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** { url, own, stop() }: `own` is true when this process started the server (stop() kills it). */
export async function benchRedis(tag = 'bench') {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, own: false, stop() {} }
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), `flowguard-${tag}-`))
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' })
  for (let i = 0; i < 100; i++) {
    if (spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout?.trim() === 'PONG') break
    await new Promise((r) => setTimeout(r, 50))
  }
  let stopped = false
  const stop = () => {
    if (stopped) return
    stopped = true
    proc.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  process.once('exit', stop)
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => { stop(); process.exit(130) })
  return { url: `redis://127.0.0.1:${port}`, own: true, stop }
}
