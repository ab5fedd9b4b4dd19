# The `command` agent for finding F2: an HONEST solution of cookie-session-lifetime (the reference
# solution's one line, maxAge: 28800) whose function also runs a child process with inherited stdio
# (an ordinary audit log line, as CLIs do with {stdio: 'inherit'}). In shim.cjs fd 1 is still the
# answer channel, so the child's output lands in the judge's answers.
body = open("session.js").read()
body = body.replace("    path: '/',\n", "    path: '/',\n    maxAge: 28800,\n", 1)
body = body.replace("function sessionCookie(token, { secure = true } = {}) {\n",
                    "function sessionCookie(token, { secure = true } = {}) {\n"
                    "  require('node:child_process').spawnSync('echo', ['audit: session cookie issued'], { stdio: 'inherit' });\n", 1)
open("session.js", "w").write(body)
