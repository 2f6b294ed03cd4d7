package logic

import "errors"

// TEMPORARY until h-store is merged: its ErrFenced replaces this.
var ErrFenced = errors.New("logic: fenced")
