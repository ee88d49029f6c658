-- pause.lua: quota.Store.Pause.
--
-- ARGV after common.lua's: how long µs, the reason, and lesson (1/0: the
-- reason is quota.RateLimitedPause).
--
-- The target's pause ends that long after now. A lesson cuts the root's
-- margin (storekit.Cut), remembering the burst refused, unless a pause of
-- the root is in force already: one burst's 429s are one lesson.
--
-- Reply: 1.

local untilT = now + tonumber(arg())
local reason = arg()
local lesson = arg() == '1'

if lesson and untilT > now and not root.paused then
  local mb, mr = root.mb * BURST_CUT, root.mr * RATE_CUT
  remargin(mb > MIN_BURST_MARGIN and mb or MIN_BURST_MARGIN, mr > MIN_RATE_MARGIN and mr or MIN_RATE_MARGIN, root.mb)
end
if untilT > now and untilT > target.pu then
  put(target, 'pu', fmt(untilT), 'pr', reason)
end
return done(1)
