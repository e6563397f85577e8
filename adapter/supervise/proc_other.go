//go:build !linux

package supervise

import "syscall"

// procAttr: without Pdeathsig outside Linux (the image is Linux only).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
