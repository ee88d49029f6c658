-- observe.lua: quota.Store.Observe.
--
-- ARGV after common.lua's: observations (see observe in common.lua),
-- applied to the target.
--
-- Reply: 1.

observe(target)
return done(1)
