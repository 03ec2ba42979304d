#!/usr/bin/env node
// Runs after `napi build` (see package.json "build"): napi-rs's generated loader, on a platform
// with no prebuilt addon, blames "an npm bug related to optional dependencies" and suggests
// reinstalling, which cannot help. Replace that message with the truth: which platform the
// package ships an addon for, and how to build one for this platform.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const file = path.join(__dirname, '..', 'native.js')
const source = fs.readFileSync(file, 'utf8')
const start = source.indexOf('`Cannot find native binding. `')
const end = source.indexOf("'Please try `npm i` again after removing both package-lock.json and node_modules directory.',", start)
if (start < 0 || end < 0) {
  if (source.includes('crosslock has no prebuilt native addon')) process.exit(0) // already done
  console.error('bindings-node/scripts/loader-message.js: the generated loader changed; update this script')
  process.exit(1)
}
const replacement = [
  '`crosslock has no prebuilt native addon for ${process.platform}-${process.arch}` +',
  "        ' (the npm package ships one for Linux x86-64 with glibc only). Build it for this platform from a' +",
  "        ' checkout of crosslock with Rust >= 1.88 installed: `npm install && npm run build` there, then' +",
  "        ' `npm install /path/to/checkout` here (see the README, \"Install\"). The load errors are in `cause`.',",
].join('\n')
const tail = "'Please try `npm i` again after removing both package-lock.json and node_modules directory.',"
fs.writeFileSync(file, source.slice(0, start) + replacement + source.slice(end + tail.length))
