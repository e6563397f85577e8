package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// process is one child: started on a goroutine locked to its OS thread (the parent-death
// signal is tied to the thread that forked, so that thread lives until the child has exited),
// in its own process group, its output in <dir>/<name>.log.
type process struct {
	name    string
	pid     int
	log     string
	done    chan struct{} // closed once the child exited; waitErr is set then
	waitErr error
}

func startProcess(dir, name, binary string, args ...string) (*process, error) {
	p := &process{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after the child.
		defer close(p.done)
		defer out.Close()
		cmd := exec.Command(binary, args...)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("starting %s: %w", name, err)
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.waitErr = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-p.done
		return nil, err
	}
	return p, nil
}

// stop sends SIGTERM to the child's process group, SIGKILL after grace, and waits.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return fmt.Errorf("%s (pid %d) needed SIGKILL", p.name, p.pid)
	case <-time.After(5 * time.Second):
		return errors.New(p.name + " did not exit after SIGKILL")
	}
}
