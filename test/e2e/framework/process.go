// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Process is a child process started by the harness, with its output in a
// log file. Stop ends it by PID: SIGTERM, then SIGKILL after a bound.
type Process struct {
	Name    string
	LogPath string

	bin, logDir string
	args, env   []string
	cmd         *exec.Cmd
	log         *os.File
	done        chan struct{}
	waitErr     error
}

// StartProcess starts bin with args, appending stdout and stderr to
// logDir/name.log. env entries are added to the harness's own environment.
func StartProcess(name, logDir, bin string, args, env []string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log for %s: %w", name, err)
	}
	fmt.Fprintf(f, "+ %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	fmt.Fprintf(f, "+ pid %d\n", cmd.Process.Pid)
	p := &Process{Name: name, LogPath: logPath, bin: bin, logDir: logDir, args: args, env: env,
		cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Relaunch starts the same binary again with the same name, arguments,
// environment and log file (appended to), e.g. after Stop or Kill.
func (p *Process) Relaunch() (*Process, error) {
	return StartProcess(p.Name, p.logDir, p.bin, p.args, p.env)
}

// Kill sends SIGKILL to the process's PID and waits (bounded) until it is gone.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) still running 10s after SIGKILL", p.Name, p.PID())
	}
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process's PID and SIGKILL if it has not exited
// after grace. It returns once the process is gone (or after a further bound).
func (p *Process) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return fmt.Errorf("%s (pid %d) ignored SIGTERM for %s and was killed", p.Name, p.PID(), grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) still running 10s after SIGKILL", p.Name, p.PID())
	}
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return tailFile(p.LogPath, n) }

// DumpLogs writes the last n lines of every *.log file in dir to w.
func DumpLogs(w io.Writer, dir string, n int) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "===== %s (last %d lines) =====\n%s\n", p, n, tailFile(p, n))
	}
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
