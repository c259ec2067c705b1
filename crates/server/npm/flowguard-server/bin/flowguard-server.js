#!/usr/bin/env node
'use strict'
// `npx flowguard-server [flags]`: runs the platform's flowguard-server binary with the same arguments and this
// process's stdio, passes SIGINT, SIGTERM and SIGHUP on to it (the server drains on SIGTERM and Ctrl-C), sends it
// SIGTERM when the process that started this one is gone, and exits with its exit status (or, when a signal ended
// it, by that same signal).
const { spawn } = require('node:child_process')
const { binaryPath } = require('../lib/binary.js')

let bin
try {
  bin = binaryPath()
} catch (e) {
  process.stderr.write(`flowguard-server: ${e.code}: ${e.message}\n`)
  process.exit(1)
}

const child = spawn(bin, process.argv.slice(2), { stdio: 'inherit' })
const forward = (signal) => {
  if (child.exitCode === null && child.signalCode === null) child.kill(signal)
}
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP']
for (const s of SIGNALS) process.on(s, forward)

// `npx` runs this launcher under `sh -c`, and passes a SIGTERM on to that shell only: the shell dies, this
// process is left to init and never sees the signal. A parent gone is taken as that SIGTERM.
const parent = process.ppid
const orphanWatch = setInterval(() => {
  if (process.ppid !== parent) {
    clearInterval(orphanWatch)
    forward('SIGTERM')
  }
}, 200)
orphanWatch.unref()

child.on('error', (e) => {
  process.stderr.write(`flowguard-server: ERR_SPAWN: cannot run ${bin}: ${e.message}\n`)
  process.exit(1)
})
child.on('exit', (code, signal) => {
  if (signal) {
    // Ended by a signal: end this process by the same one, so the caller sees what the server saw.
    for (const s of SIGNALS) process.removeListener(s, forward)
    process.kill(process.pid, signal)
    return
  }
  process.exit(code ?? 1)
})
