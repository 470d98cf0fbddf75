# E2B's Python quick-start as E2B's docs give it (the e2b package's README, "Start a sandbox and
# run commands"; e2b.dev/docs, "Read & write files" and "Connecting to a server running inside
# the sandbox"), kept verbatim for tests/test_e2b_quickstart.py to compare the Berth port
# against. Not run.
from e2b import Sandbox

sandbox = Sandbox.create()

result = sandbox.commands.run('echo "Hello from E2B!"')
print(result.stdout)  # Hello from E2B!

sandbox.files.write('/home/user/my-file', 'Hello, world!')
content = sandbox.files.read('/home/user/my-file')
print(content)

# Start a simple HTTP server inside the sandbox.
process = sandbox.commands.run("python -m http.server 3000", background=True)
host = sandbox.get_host(3000)
url = f"https://{host}"
print('Server started at:', url)

# Fetch data from the server inside the sandbox.
response = sandbox.commands.run(f"curl {url}")
data = response.stdout
print("Response from server inside sandbox:", data)

# Kill the server process inside the sandbox.
process.kill()

sandbox.kill()
