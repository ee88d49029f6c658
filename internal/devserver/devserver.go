package devserver

import _ "go.temporal.io/server/temporaltest"
