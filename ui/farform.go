package ui

import (
	"context"
	"sync"

	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// farForm is a form of a remote context's settings (the Container tab's,
// the Tasks tab's model server): read and saved through the far owner off
// the UI goroutine, each save based on the revision the form was filled
// from, so a change made there since is reported, never overwritten.
type farForm struct {
	src          farSettings
	do           func(func())
	save, reload *widget.Button
	note         *widget.Label
	// show fills the tab's widgets from what was read. UI goroutine.
	show func(config.Sandbox)

	mu   sync.Mutex
	cfg  config.Sandbox // what the form was filled from
	rev  string         // its revision
	read bool           // false until the first read answered
}

// load reads the settings and fills the form; Save waits for them. Call
// on the UI goroutine.
func (f *farForm) load() {
	f.save.Disable()
	f.reload.Disable()
	f.note.SetText("Reading the settings…")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		file, err := f.src.ReadSettings(ctx)
		f.do(func() {
			f.reload.Enable()
			if err != nil {
				f.note.SetText(err.Error())
				return
			}
			f.fill(file)
			f.note.SetText(farSettingsNote(file))
		})
	}()
}

// fill records file as what the form shows and shows it. UI goroutine.
func (f *farForm) fill(file api.SettingsFile) {
	f.mu.Lock()
	f.cfg, f.rev, f.read = file.Settings, file.Revision, true
	f.mu.Unlock()
	f.show(file.Settings)
	f.save.Enable()
}

// based is what the form was filled from and its revision; ok false
// before the first read answered.
func (f *farForm) based() (cfg config.Sandbox, rev string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg, f.rev, f.read
}

// write saves next based on rev, then fills the form with what the owner
// kept and says saved(file) and what is wrong with the file; failed hears
// an error. Call on the UI goroutine.
func (f *farForm) write(next config.Sandbox, rev string, failed func(error), saved func(api.SettingsFile) string) {
	f.save.Disable()
	f.note.SetText("Saving…")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		file, err := f.src.WriteSettings(ctx, next, rev)
		f.do(func() {
			f.save.Enable()
			if err != nil {
				f.note.SetText(err.Error())
				failed(err)
				return
			}
			f.fill(file)
			msg := saved(file)
			if note := farSettingsNote(file); note != "" {
				msg += "\n" + note
			}
			f.note.SetText(msg)
		})
	}()
}
