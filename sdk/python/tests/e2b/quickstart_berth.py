# E2B's Python quick-start (quickstart_e2b.py beside it) ported to Berth: the import and the
# class name changed, and the lines marked "Berth:" (see tests/test_e2b_quickstart.py).
from berth import Workspace

sandbox = Workspace.create()

result = sandbox.commands.run('echo "Hello from E2B!"')
print(result.stdout)  # Hello from E2B!

sandbox.files.write('/home/user/my-file', 'Hello, world!')
content = sandbox.files.read('/home/user/my-file')
print(content)

# Start a simple HTTP server inside the sandbox.
process = sandbox.commands.run("python3 -m http.server 3000", background=True)  # Berth: Berth's base image has python3 and no `python`
host = sandbox.get_host(3000)
url = f"http://{host}"  # Berth: the test's berthd serves previews in plain HTTP (an operator's TLS front makes them https, as the TypeScript port shows)
print('Server started at:', url)

# Fetch data from the server inside the sandbox.
token = sandbox.previews.create(3000).token  # Berth: previews are private; a preview token opens one
response = sandbox.commands.run(f"curl -sS -H 'X-Berth-Preview-Token: {token}' {url}")  # Berth: with the token
data = response.stdout
print("Response from server inside sandbox:", data)

# Kill the server process inside the sandbox.
process.kill()

sandbox.kill()
