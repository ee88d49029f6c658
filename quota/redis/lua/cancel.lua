-- cancel.lua: quota.Store.Cancel.
--
-- ARGV after common.lua's: the ticket.
--
-- Reply: 1, or 0 if the ticket is unknown; {-1, tenant} for a ticket
-- reserved under another tenant.

local ticketID = arg()

local t, other = ticket()
if other then return wrongTenant(other) end
if not t then
  redis.call('DEL', T)
  for _, b in ipairs(budgets) do
    if b.conc then redis.call('ZREM', b.L, ticketID) end
  end
  return done(0)
end
local m = member(t, ticketID)
local c = t.cost
-- A grant given up before its call started gives its start back.
if t.s == 'g' then gate(c, 0, -1, tonumber(t.m)) end
for _, b in ipairs(budgets) do
  adjust(b, {-c[1], -c[2], -c[3], -c[4], -c[5]}, t.at)
  if b.conc then redis.call('ZREM', b.L, ticketID) end
  redis.call('ZREM', b.Q, m)
end
unline(m)
redis.call('DEL', T)
return done(1)
