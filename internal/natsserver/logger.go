package natsserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
)

// slogLogger passes the embedded server's log lines to slog (component
// "nats"), so its warnings and errors (a full disk: "JetStream out of
// resources, will be DISABLED") reach cuecast's log instead of NoLog's void.
// Its notices (the start-up banner, every stream it loads) are Debug. A
// fatal error also goes to fatal (the first one; the rest are only logged)
// for Start, which would otherwise wait for a server that never becomes
// ready.
type slogLogger struct {
	log   *slog.Logger
	fatal chan<- string
}

func (l slogLogger) Noticef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }
func (l slogLogger) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l slogLogger) Errorf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }
func (l slogLogger) Fatalf(format string, v ...any) {
	l.emit(slog.LevelError, format, v)
	select {
	case l.fatal <- strings.TrimSpace(fmt.Sprintf(format, v...)):
	default:
	}
}
func (l slogLogger) Debugf(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }
func (l slogLogger) Tracef(format string, v ...any) { l.emit(slog.LevelDebug-4, format, v) }

func (l slogLogger) emit(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "nats")
}

// checkPort fails at once when host:port is taken: the server itself would
// only log it and never become ready. A port taken after this look is
// the server's fatal error, which Start reports too (slogLogger.fatal).
func checkPort(flag, host string, port int) error {
	if port <= 0 {
		return nil
	}
	addr := net.JoinHostPort(host, fmt.Sprint(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s %s: port %d is not available (another process listens on it?): %w", flag, addr, port, err)
	}
	return ln.Close()
}
