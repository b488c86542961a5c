package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// screenshot renders the HTML file page with headless chromium into png at width×height CSS
// pixels (device scale 1). The browser gets a fresh profile under dir and none of its
// background network traffic; it is stopped, with its helper processes, if it has not
// finished within a minute.
func screenshot(bin, dir, page, png string, width, height int) error {
	abs, err := filepath.Abs(png)
	if err != nil {
		return err
	}
	_ = os.Remove(abs)
	p, err := startProc("chromium", filepath.Join(dir, "chromium.log"), bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-crash-reporter", "--disable-breakpad",
		"--user-data-dir="+filepath.Join(dir, "chromium-profile"), "--hide-scrollbars",
		"--force-device-scale-factor=1", fmt.Sprintf("--window-size=%d,%d", width, height),
		"--screenshot="+abs, "file://"+page)
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.wait(time.Minute); err != nil {
		return fmt.Errorf("chromium: %w; its log ends:\n%s", err, logTail(filepath.Join(dir, "chromium.log")))
	}
	st, err := os.Stat(abs)
	if err != nil || st.Size() == 0 {
		return fmt.Errorf("chromium wrote no screenshot to %s; its log ends:\n%s", abs, logTail(filepath.Join(dir, "chromium.log")))
	}
	return nil
}
