// E2B's JavaScript quick-start (quickstart.e2b.mjs beside it) ported to Berth: the import and
// the class name changed, and the lines marked "Berth:" (see test/quickstart.test.mjs).
import { Workspace } from '@berth/sdk'

const sandbox = await Workspace.create()

const result = await sandbox.commands.run('echo "Hello from E2B Sandbox!"')
console.log(result.stdout)

await sandbox.files.write('/home/user/my-file', 'Hello, world!')
const content = await sandbox.files.read('/home/user/my-file')
console.log(content)

// Start a simple HTTP server inside the sandbox.
const process = await sandbox.commands.run('python3 -m http.server 3000', { background: true }) // Berth: Berth's base image has python3 and no `python`
const host = sandbox.getHost(3000)
const url = `https://${host}`
console.log('Server started at:', url)

// Fetch data from the server inside the sandbox.
await sandbox.waitForPort(3000) // Berth: the server takes a moment to listen (E2B's docs race it)
const { token } = await sandbox.previews.create(3000) // Berth: previews are private; a preview token opens one
const response = await fetch(url, { headers: { 'X-Berth-Preview-Token': token } }); // Berth: with the token
const data = await response.text();
console.log('Response from server inside sandbox:', data);

// Kill the server process inside the sandbox.
await process.kill()

await sandbox.kill()
