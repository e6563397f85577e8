package supervise

import "syscall"

// procAttr makes the kernel kill the driver when the supervisor dies, so that
// no driver outlives its controller (the container ends with PID 1 anyway).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
