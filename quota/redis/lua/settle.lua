-- settle.lua: quota.Store.Settle.
--
-- ARGV after common.lua's: the actual cost (requests, tokens, input,
-- output tokens, spend), the ticket, the epochs the caller was granted it in (the
-- root's, then the tenant's budget's; '' when it was not, see regrant),
-- the prompt, counted (1/0), the calibration's min and max ratio and
-- half-life µs, the cost the caller was told the ticket holds charged (5
-- parts), then observations (see observe in common.lua), applied to the
-- root: a provider reports on the account.
--
-- The observations, and with a counted actual the root's lesson (actual
-- input over prompt), apply whether or not the ticket is held. A ticket no
-- longer held is charged what the actual cost exceeds its charge by, on
-- every budget, refunding nothing (its estimate is still charged, and its
-- call may have run); if its record alone is gone, it releases the grant
-- it held (regrant).
--
-- Reply: 1, or 0 if the ticket is not held as granted; {-1, tenant} for a
-- ticket reserved under another tenant, changing nothing.

local actual = numbers(5)
local ticketID = arg()
local proofs = {args(2)}
local prompt, counted = args(2)
prompt, counted = prompt * 1, counted == '1'
-- The calibration's bounds and the cost told are read as strings and
-- parsed only on the paths that use them: parsing is most of the work.
local minR, maxR, half = args(3)
local told = {args(5)}

local t, other = ticket()
if other then return wrongTenant(other) end
local held = 0
if t and t.s == 'g' then
  local delta = {}
  for j = 1, 5 do delta[j] = actual[j] - t.cost[j] end
  for _, b in ipairs(budgets) do
    adjust(b, delta, t.at)
    if b.conc then redis.call('ZREM', b.L, ticketID) end
  end
  -- The gates are corrected too: a provider counts what a call used.
  gate(delta, 0, 1)
  redis.call('DEL', T)
  held = 1
elseif not t then
  local over, any = {}, false
  for j = 1, 5 do
    over[j] = actual[j] - told[j] * 1
    if over[j] > 0 then any = true else over[j] = 0 end
  end
  if any then
    for _, b in ipairs(budgets) do adjust(b, over) end
  end
  if regrant(ticketID, nil, proofs) then held = 1 end
end
observe(root)
if counted and prompt > 0 and actual[3] > 0 then learn(actual[3] / prompt, minR * 1, maxR * 1, half * 1) end
-- A call counted as it went grows every bucket's burst (storekit.Gain) and
-- earns back a little of its rate.
if counted then
  local grown = false
  for k = 1, root.n do
    local a = root.axes[k]
    if a.kind == BUCKET and (a.mb < root.mx or a.mr < 1) then
      local grow = BURST_GROWTH
      if a.mf > 0 and a.mb >= BURST_RECOVER * a.mf then grow = BURST_PROBE end
      local mb, mr = a.mb * grow, a.mr + RATE_GAIN
      if mb > root.mx then mb = root.mx end
      if mb < a.mb then mb = a.mb end
      a.nb, a.nr, a.nf = mb, mr < 1 and mr or 1, a.mf
      grown = true
    end
  end
  if grown then remargin() end
end
return done(held)
