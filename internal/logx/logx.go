// Package logx holds the logger helpers the actors share.
package logx

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// With returns l with fields added, like l.With(fields...), except for a logger that can log
// nothing (its core is disabled at every level up to Fatal, as zap.NewNop's is): that logger
// is returned as it is, since its fields could never appear. zap's With clones the logger even
// for the no-op core (~130 B per call), and every idle stream carries several of them.
func With(l *zap.Logger, fields ...zap.Field) *zap.Logger {
	if !l.Core().Enabled(zapcore.FatalLevel) {
		return l
	}
	return l.With(fields...)
}
