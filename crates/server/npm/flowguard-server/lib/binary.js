'use strict'
// Which flowguard-server binary this machine runs: the one in the platform package npm installed beside this one
// (an optionalDependency with `os` and `cpu` fields, so npm installs only the package of this platform), found with
// require.resolve as esbuild and biome do. No install script: nothing is downloaded at install time.

/** The platform packages, by `${process.platform}-${process.arch}`. The Linux binaries are static (musl, crt-static):
 * one package per CPU serves glibc and musl systems alike. */
const PLATFORM_PACKAGES = {
  'linux-x64': '@flowguard/server-linux-x64',
  'linux-arm64': '@flowguard/server-linux-arm64',
}

class BinaryError extends Error {
  constructor(code, message, field) {
    super(message)
    this.name = 'BinaryError'
    this.code = code
    if (field) this.field = field
  }
}

/**
 * The absolute path of the binary to run. FLOWGUARD_SERVER_BINARY overrides the lookup (a binary built from source,
 * or one on a platform without a package). Throws a BinaryError with a stable `code`:
 * ERR_UNSUPPORTED_PLATFORM (no package is published for this platform) or ERR_PLATFORM_PACKAGE_MISSING (the
 * package exists but is not installed: npm was run with --omit=optional, or on another platform).
 */
function binaryPath({ platform = process.platform, arch = process.arch, env = process.env, resolve = require.resolve } = {}) {
  if (env.FLOWGUARD_SERVER_BINARY) return env.FLOWGUARD_SERVER_BINARY
  const key = `${platform}-${arch}`
  const pkg = PLATFORM_PACKAGES[key]
  if (!pkg) {
    throw new BinaryError(
      'ERR_UNSUPPORTED_PLATFORM',
      `flowguard-server has no binary package for ${key} (published: ${Object.keys(PLATFORM_PACKAGES).join(', ')}); ` +
        'build it from source (cargo build --release -p flowguard-server) and set FLOWGUARD_SERVER_BINARY to its path, or run the container image',
      'platform',
    )
  }
  try {
    return resolve(`${pkg}/bin/flowguard-server`)
  } catch {
    throw new BinaryError(
      'ERR_PLATFORM_PACKAGE_MISSING',
      `flowguard-server's binary for ${key} is the package ${pkg}, which is not installed: npm skips optional ` +
        `dependencies with --omit=optional (or when node_modules was installed on another platform); install it ` +
        `with \`npm install ${pkg}\`, or set FLOWGUARD_SERVER_BINARY to a flowguard-server binary`,
      pkg,
    )
  }
}

module.exports = { PLATFORM_PACKAGES, BinaryError, binaryPath }
