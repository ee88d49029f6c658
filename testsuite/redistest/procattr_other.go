//go:build !linux

package redistest

import "syscall"

// procAttr has nothing to add outside Linux, which alone has Pdeathsig.
func procAttr() *syscall.SysProcAttr { return nil }
