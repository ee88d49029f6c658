// Package redistest starts a Redis server for tests.
//
// Start and StartServer run a fresh, real redis-server on a free loopback
// port, with no persistence, in the test's temporary directory, and stop it
// when the test ends. Tests of code that talks to Redis thereby run against
// the real thing, Lua scripting and TIME included. StartProcess and
// StartCluster are for tests that need the process itself (CONFIG SET, a
// cluster): they always start their own.
//
// Tests never read the worker's REDIS_URL, so running them in a shell set up
// for a fleet leaves the fleet's Redis alone. Three variables of their own
// change where the server comes from:
//
//   - TOLLGATE_TEST_REDIS_SERVER names the redis-server binary (default
//     redis-server, looked up on PATH). Set it to a name that does not exist
//     to see what a machine without Redis does.
//   - TOLLGATE_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/15) points
//     StartServer at an existing database instead. It must be empty when a
//     test starts (a test that finds keys there fails, touching nothing) and
//     is emptied when the test ends, so run one package at a time
//     (go test -p 1). Such a server cannot be stopped by the test:
//     Server.Stop and Server.Restart skip the calling test.
//   - TOLLGATE_TEST_REQUIRE_REDIS=1 makes a missing redis-server a test
//     failure, and every skip above one too. Without it, a machine with no
//     redis-server runs StartServer's tests on an in-process miniredis
//     (github.com/alicebob/miniredis/v2), which speaks the protocol and runs
//     the same Lua script on gopher-lua, and skips the tests that need a
//     real process with one line naming the install command.
package redistest
