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

func startProcess(dir, name string, env []string, binary string, args ...string) (*process, error) {
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
		if env != nil {
			cmd.Env = append(os.Environ(), env...)
		}
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

// Process is a child started by StartProcess: in its own process group, with a parent-death
// signal (a test binary killed outright takes it along), its stdout and stderr in one log file.
type Process struct{ p *process }

// StartProcess starts binary with args in dir, env added to this process's environment; its
// output goes to <dir>/<name>.log.
func StartProcess(dir, name string, env []string, binary string, args ...string) (*Process, error) {
	p, err := startProcess(dir, name, env, binary, args...)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Name is the name the process was started with.
func (p *Process) Name() string { return p.p.name }

// Pid is the child's process id (its process group's id too).
func (p *Process) Pid() int { return p.p.pid }

// LogPath is the file of its stdout and stderr.
func (p *Process) LogPath() string { return p.p.log }

// Log is what it wrote so far.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.p.log)
	return string(data)
}

// Exited tells whether the child has exited, and with what.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.p.done:
		return true, p.p.waitErr
	default:
		return false, nil
	}
}

// Done is closed once the child has exited.
func (p *Process) Done() <-chan struct{} { return p.p.done }

// Stop sends SIGTERM to its process group, SIGKILL after grace, and waits for it.
func (p *Process) Stop(grace time.Duration) error { return p.p.stop(grace) }

// Kill sends SIGKILL to its process group (no chance to clean up) and waits for it.
func (p *Process) Kill() error {
	select {
	case <-p.p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.p.pid, syscall.SIGKILL)
	select {
	case <-p.p.done:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New(p.p.name + " did not exit after SIGKILL")
	}
}
