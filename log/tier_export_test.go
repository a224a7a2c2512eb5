package log

// RunTierPass runs one pass of the Dir's tiered storage copier and deleter
// over every tiered partition and returns when it is done.
func (d *Dir) RunTierPass() { d.tier.passAll() }
