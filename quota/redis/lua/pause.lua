-- pause.lua: quota.Store.Pause.
--
-- ARGV after common.lua's: how long µs, the reason, and the lesson: '0'
-- none, '*' every bucket axis (quota.PauseRateLimited), or the id of the
-- axis the provider named (quota.RateLimitedOn).
--
-- The target's pause ends that long after now. A lesson cuts the margin
-- (storekit.Cut) of the root's bucket on the axis named, or of every
-- bucket when it names none or one the root does not limit, remembering
-- the burst refused, unless a pause of the root is in force already: one
-- burst's 429s are one lesson.
--
-- Reply: 1.

local untilT = now + tonumber(arg())
local reason = arg()
local lesson = arg()

if lesson ~= '0' and untilT > now and not root.paused then
  local named = false
  for k = 1, root.n do
    if root.axes[k].kind == BUCKET and root.axes[k].id == lesson then named = true end
  end
  for k = 1, root.n do
    local a = root.axes[k]
    if a.kind == BUCKET and (a.id == lesson or not named) then
      local mb, mr = a.mb * BURST_CUT, a.mr * RATE_CUT
      a.nb, a.nr, a.nf = mb > MIN_BURST_MARGIN and mb or MIN_BURST_MARGIN, mr > MIN_RATE_MARGIN and mr or MIN_RATE_MARGIN, a.mb
    end
  end
  remargin()
end
if untilT > now and untilT > target.pu then
  put(target, 'pu', fmt(untilT), 'pr', reason)
end
return done(1)
