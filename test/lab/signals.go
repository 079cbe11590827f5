package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// CloseOnSignal tears the lab down and exits (status 130) on SIGINT or SIGTERM, so an
// interrupted test or demo leaves nothing behind. Namespaces of other labs of this
// process (with the same prefix) are deleted too, since the process is about to exit. Call the returned stop function to
// uninstall the handler (normally after Close).
func (l *Lab) CloseOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "lab: %v: tearing down\n", sig)
			if err := l.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "lab: teardown: %v\n", err)
			}
			if err := removeOwnNamespaces(l.Options.Prefix); err != nil {
				fmt.Fprintf(os.Stderr, "lab: teardown of other labs: %v\n", err)
			}
			os.Exit(130)
		case <-quit:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
	}
}

// removeOwnNamespaces deletes every namespace this process owns under prefix.
func removeOwnNamespaces(prefix string) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names, err := listNamespaces(ctx)
	if err != nil {
		return err
	}
	removeWorkDirs(func(pid int) bool { return pid == os.Getpid() })
	own := fmt.Sprintf("%s%d-", prefix, os.Getpid())
	var errs []error
	for _, n := range names {
		if strings.HasPrefix(n, own) {
			errs = append(errs, deleteNamespace(ctx, n))
		}
	}
	return errors.Join(errs...)
}
