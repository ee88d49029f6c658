// Package redistest starts a Redis server for tests.
//
// Start and StartServer run a fresh, real redis-server (found on PATH) on a
// free loopback port, with no persistence, in the test's temporary directory,
// and stop it when the test ends. Tests of code that talks to Redis thereby
// run against the real thing, Lua scripting and TIME included.
//
// Two environment variables change where the server comes from:
//
//   - REDIS_URL (e.g. redis://127.0.0.1:6379/15) points the tests at an
//     existing server instead. Its database is flushed when a test starts, so
//     give tests a database of their own. Such a server cannot be stopped by
//     the test: Server.Stop and Server.Restart skip the calling test.
//   - TOLLGATE_TEST_REQUIRE_REDIS=1 makes a missing redis-server a test
//     failure. Without it, a machine with no redis-server falls back to an
//     in-process miniredis (github.com/alicebob/miniredis/v2), which speaks
//     the protocol and runs Lua but is not Redis.
package redistest
