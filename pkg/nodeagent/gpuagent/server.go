// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package gpuagent

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// ServerLimits bound what one client can hold of the agent's HTTP server:
// how long it may take to send a request, to read the answer and to keep an
// idle connection, how large its headers may be, and how many connections
// are served at once.
type ServerLimits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// MaxConnections is the most connections served at once; further
	// connections wait in the kernel's accept queue until one closes.
	MaxConnections int
}

// DefaultServerLimits fit the agent's clients: the adapter (one keep-alive
// connection per replica, a GET every scrape interval), the kubelet's probes
// and perhaps a Prometheus. The page is a few kilobytes.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		MaxConnections:    16,
	}
}

// NewServer returns an HTTP server for h with the timeouts and header limit
// of l. Serve it on LimitListener(lis, l.MaxConnections).
func NewServer(h http.Handler, l ServerLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// LimitListener returns a listener that holds at most n accepted
// connections open at once: Accept waits while n are open.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn frees its listener's slot on its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
