package logtest

// SyncedEnd is syncedEnd, for the external tests.
func (m *Model) SyncedEnd() int64 { return m.syncedEnd() }
