# Cloud Scheduler publishes one tick per schedule to the ticks topic, attribute task=NAME (the
# service keys a tick by task and schedule slot, so a duplicated run collapses into one). A cron
# task registered with registry.tick(name, cron=..., timezone=...) gets the same schedule and zone.

resource "google_cloud_scheduler_job" "tick" {
  for_each    = var.tick_schedules
  name        = "${var.name}-${each.key}"
  description = "Tick for the ${each.key} task of ${var.name}"
  region      = var.region
  schedule    = each.value.schedule
  time_zone   = each.value.time_zone

  retry_config {
    retry_count = 3
  }

  pubsub_target {
    topic_name = google_pubsub_topic.events["ticks"].id
    data       = base64encode(jsonencode({ task = each.key }))
    attributes = {
      task = each.key
    }
  }

  depends_on = [google_project_service.apis]
}
