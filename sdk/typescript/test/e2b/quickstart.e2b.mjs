// E2B's JavaScript quick-start as E2B's docs give it (e2b.dev/docs: the quick-start, "Read &
// write files" and "Connecting to a server running inside the sandbox"), kept verbatim for
// test/quickstart.test.mjs to compare the Berth port against. Not run.
import { Sandbox } from 'e2b'

const sandbox = await Sandbox.create()

const result = await sandbox.commands.run('echo "Hello from E2B Sandbox!"')
console.log(result.stdout)

await sandbox.files.write('/home/user/my-file', 'Hello, world!')
const content = await sandbox.files.read('/home/user/my-file')
console.log(content)

// Start a simple HTTP server inside the sandbox.
const process = await sandbox.commands.run('python -m http.server 3000', { background: true })
const host = sandbox.getHost(3000)
const url = `https://${host}`
console.log('Server started at:', url)

// Fetch data from the server inside the sandbox.
const response = await fetch(url);
const data = await response.text();
console.log('Response from server inside sandbox:', data);

// Kill the server process inside the sandbox.
await process.kill()

await sandbox.kill()
