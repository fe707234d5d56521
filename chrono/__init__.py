"""Time, on the bottom floor: cron as the CronJob controller parses and fires it (kcron,
cron), zones and clock changes, reservation windows (calendar), prescale times (prescale)
and the one instant a run computes at (clock). Standard library and tzdata only: config/
checks and reads with it, plan/ and the reservation switch's pod compute with it."""
